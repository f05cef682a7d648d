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
# usage: [SESSIONS=112] [DURATION=600] [IDLE_CAP=3600] [SMALLS="16000000 24000000"] [BIG=96000000]
#        [SSD_FACTOR=4] [SSD_GBPS=3.5] [SSD_DIR=/var/tmp] [BUILD=build] scripts/bench-ssd-replay.sh
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
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --seed 1 --sessions "$SESSIONS" --duration "$DURATION" --idle-cap "$IDLE_CAP" --mode pool)
run() {  # run NAME FLAGS...
  local name=$1; shift
  echo "== $name: kvpool replay ${common[*]} $*"
  "$BUILD"/src/cli/kvpool replay "${common[@]}" "$@" --json "$OUT/$name.json"
}
run unlimited --pool-tokens "$BIG"
for small in $SMALLS; do
  run "dram-$small" --pool-tokens "$small"
  run "ssd-$small" --pool-tokens "$small" --ssd-tokens $((SSD_FACTOR * small)) --ssd-dir "$SSD_DIR" --ssd-gbps "$SSD_GBPS"
done
/usr/bin/python3 - "$OUT" "$SSD_DIR" "$SMALLS" "$BIG" "$SSD_FACTOR" "$IDLE_CAP" "${common[*]}" "$SSD_GBPS" <<'PY'
import datetime, json, os, subprocess, sys
out, ssd_dir, smalls, big, factor, idle_cap, common, ssd_gbps = sys.argv[1:]
fs = subprocess.run(["df", "--output=fstype,source", ssd_dir], capture_output=True, text=True).stdout.split("\n")[1].split()
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
def run(name):
    return json.load(open(os.path.join(out, name + ".json")))["runs"][0]
sizes = [{"pool_tokens": int(s), "dram": run(f"dram-{s}"), "dram+ssd": run(f"ssd-{s}")} for s in smalls.split()]
json.dump({"command": "scripts/bench-ssd-replay.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "filesystem": f"{fs[0]} on {fs[1]}" if len(fs) == 2 else "?",
           "settings": {"replay": "kvpool replay " + common, "unlimited_pool_tokens": int(big),
                        "ssd_factor": int(factor), "idle_cap_s": float(idle_cap), "ssd_gbps": float(ssd_gbps)},
           "unlimited": run("unlimited"), "sizes": sizes},
          open("docs/results/ssd-replay.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/ssd-replay.json  # the commit measured
/usr/bin/python3 scripts/render_ssd_benchmarks.py
echo "bench-ssd-replay: docs/results/ssd-replay.json and docs/benchmarks.md updated"
