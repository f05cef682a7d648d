#!/usr/bin/env bash
# The SSD tier in the replay (issue 17): sessions that pause for many minutes, a DRAM pool
# smaller than their working set, and an SSD tier of SSD_FACTOR x the DRAM under it. Runs of
# `kvpool replay` in one go, with the same corpus, seed, load and window:
#   unlimited  a DRAM pool that holds every history (BIG tokens)
#   and for each size S of SMALLS:
#   dram       a DRAM pool of S tokens
#   dram+ssd   the same DRAM and an SSD tier of SSD_FACTOR x S tokens, its file in SSD_DIR
# Target: the SSD tier wins back >= 80% of the reuse the small DRAM loses against the unlimited
# pool. The pauses are the synthetic corpus's (waits of minutes, rare ones over an hour) with the
# idle cap raised to IDLE_CAP seconds, so a paused session's history has to outlast the churn of
# the others. Raw results: docs/results/ssd-replay.json, rendered into docs/benchmarks.md by
# scripts/render_ssd_benchmarks.py.
#
# Every run once per seed of SEEDS (default 1 2 3): the pool runs on the replay's clock, so one
# seed gives one result (issue 41); the spread is across seeds, and the target is checked seed by
# seed. JOBS runs go at once (default: one per core; only the wall time depends on it).
#
# usage: [SESSIONS=112] [DURATION=600] [IDLE_CAP=3600] [SMALLS="16000000 24000000"] [BIG=96000000]
#        [SSD_FACTOR=4] [SSD_GBPS=3.5] [SSD_DIR=/var/tmp] [SEEDS="1 2 3"] [JOBS=N] [BUILD=build]
#        scripts/bench-ssd-replay.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-112}
DURATION=${DURATION:-600}
IDLE_CAP=${IDLE_CAP:-3600}
SMALLS=${SMALLS:-16000000 24000000}
BIG=${BIG:-96000000}
SSD_FACTOR=${SSD_FACTOR:-4}
SSD_DIR=${SSD_DIR:-/var/tmp}
SSD_GBPS=${SSD_GBPS:-3.5}
SEEDS=${SEEDS:-1 2 3}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --sessions "$SESSIONS" --duration "$DURATION" --idle-cap "$IDLE_CAP" --mode pool)
run() {  # run NAME SEED FLAGS...: in the background, JOBS at most (bench_job)
  local name=$1 seed=$2; shift 2
  echo "== $name, seed $seed: kvpool replay ${common[*]} --seed $seed $*"
  bench_job "$BUILD"/src/cli/kvpool replay "${common[@]}" --seed "$seed" "$@" --json "$OUT/$name-$seed.json" \
    >"$OUT/$name-$seed.log" 2>&1
}
for seed in $SEEDS; do
  run unlimited "$seed" --pool-tokens "$BIG"
  for small in $SMALLS; do
    run "dram-$small" "$seed" --pool-tokens "$small"
    run "ssd-$small" "$seed" --pool-tokens "$small" --ssd-tokens $((SSD_FACTOR * small)) --ssd-dir "$SSD_DIR" --ssd-gbps "$SSD_GBPS"
  done
done
bench_jobs_wait
for f in "$OUT"/*.log; do [ -s "${f%.log}.json" ] || { echo "a replay failed: $f" >&2; tail -5 "$f" >&2; exit 1; }; done
/usr/bin/python3 - "$OUT" "$SSD_DIR" "$SMALLS" "$BIG" "$SSD_FACTOR" "$IDLE_CAP" "${common[*]}" "$SSD_GBPS" "$SEEDS" <<'PY'
import datetime, json, os, subprocess, sys
out, ssd_dir, smalls, big, factor, idle_cap, common, ssd_gbps, seeds = sys.argv[1:]
seeds = [int(x) for x in seeds.split()]
fs = subprocess.run(["df", "--output=fstype,source", ssd_dir], capture_output=True, text=True).stdout.split("\n")[1].split()
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
def run(name, seed):
    return json.load(open(os.path.join(out, f"{name}-{seed}.json")))["runs"][0]
def reuse(name, seed):
    return run(name, seed)["token_sources"]["reuse"]
# The table shows the first seed's runs whole; every seed's reuse goes beside them.
first = seeds[0]
sizes = [{"pool_tokens": int(s), "dram": run(f"dram-{s}", first), "dram+ssd": run(f"ssd-{s}", first)} for s in smalls.split()]
by_seed = [{"seed": seed, "unlimited_reuse": reuse("unlimited", seed),
            "sizes": [{"pool_tokens": int(s), "dram_reuse": reuse(f"dram-{s}", seed), "ssd_reuse": reuse(f"ssd-{s}", seed),
                       "errors": sum(run(n, seed)["verification_errors"] + run(n, seed)["failed_requests"]
                                     for n in (f"dram-{s}", f"ssd-{s}"))}
                      for s in smalls.split()]} for seed in seeds]
json.dump({"command": "scripts/bench-ssd-replay.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "filesystem": f"{fs[0]} on {fs[1]}" if len(fs) == 2 else "?",
           "settings": {"replay": "kvpool replay " + common, "unlimited_pool_tokens": int(big),
                        "ssd_factor": int(factor), "idle_cap_s": float(idle_cap), "ssd_gbps": float(ssd_gbps),
                        "seeds": seeds},
           "seed": first, "unlimited": run("unlimited", first), "sizes": sizes, "by_seed": by_seed},
          open("docs/results/ssd-replay.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/ssd-replay.json  # the commit measured
/usr/bin/python3 scripts/render_ssd_benchmarks.py
echo "bench-ssd-replay: docs/results/ssd-replay.json and docs/benchmarks.md updated"
