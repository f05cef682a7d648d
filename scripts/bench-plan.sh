#!/usr/bin/env bash
# The capacity planner against the replay it predicts (issue 18), in one run: `kvpool plan` and
# `kvpool replay --retention lru` with the same corpus, seed, sessions and window, at each pool
# size of SIZES and each load of SESSIONS. Target (issue 18): the plan within 2 points of the
# replay's reuse at three sizes. Raw results: docs/results/plan.json, rendered into
# docs/benchmarks.md by scripts/render_plan_benchmarks.py.
#
# The replays run JOBS at once (default: one per core; only their wall time depends on it).
#
# The same at MORE_SEEDS (default "2 3"; "" skips them): docs/results/plan-seeds.json, the spread of
# the check across seeds (about 25 min a seed here). SEED=none runs only MORE_SEEDS.
#
# usage: [SESSIONS="96 112"] [DURATION=600] [SIZES="20000000 24000000 28000000 32000000"] [JOBS=N] [BUILD=build]
#        [SEED=1|none] [MORE_SEEDS="2 3"] scripts/bench-plan.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-96 112}
DURATION=${DURATION:-600}
SIZES=${SIZES:-20000000 24000000 28000000 32000000}
MORE_SEEDS=${MORE_SEEDS-2 3}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# One seed's plans and replays into $OUT/seedS/, summarised as that seed's "loads" (JSON on stdout).
run_seed() {  # run_seed SEED
  local seed=$1 dir="$OUT/seed$1"
  mkdir -p "$dir"
  common=(--synth 393 --seed "$seed" --duration "$DURATION")
  for n in $SESSIONS; do
    pool_list=$(echo "$SIZES" | tr ' ' ',')
    echo "== seed $seed, plan at $n sessions: kvpool plan ${common[*]} --sessions $n --pool $pool_list" >&2
    start=$(date +%s%N)
    "$BUILD"/src/cli/kvpool plan "${common[@]}" --sessions "$n" --pool "$pool_list" --json "$dir/plan-$n.json" >&2
    echo $(( ($(date +%s%N) - start) / 1000000 )) > "$dir/plan-$n.wall"  # ms
    for size in $SIZES; do
      echo "== seed $seed, replay at $n sessions, $size tokens: kvpool replay ${common[*]} --sessions $n --mode pool --pool-tokens $size" >&2
      bench_job "$BUILD"/src/cli/kvpool replay "${common[@]}" --sessions "$n" --mode pool --pool-tokens "$size" \
        --json "$dir/replay-$n-$size.json" >"$dir/replay-$n-$size.log" 2>&1
    done
  done
  bench_jobs_wait
  for f in "$dir"/replay-*.log; do [ -s "${f%.log}.json" ] || { echo "a replay failed: $f" >&2; tail -5 "$f" >&2; exit 1; }; done
  /usr/bin/python3 - "$dir" "$SESSIONS" "$SIZES" <<'PY'
import json, os, sys
out, sessions, sizes = sys.argv[1:]
sys.path.insert(0, "scripts")
from bench_machine import machine_timings  # noqa: E402
def replayed(n, size):
    r = json.load(open(os.path.join(out, f"replay-{n}-{size}.json")))["runs"][0]
    return {k: r[k] for k in ("requests", "token_sources", "ttft_s", "throughput_tok_s_per_gpu",
                              "verification_errors", "failed_requests", "restore_fallback_tokens")} | {
        "wall_s": machine_timings(r)["wall_s"]}
loads = []
for n in sessions.split():
    plan = json.load(open(os.path.join(out, f"plan-{n}.json")))
    loads.append({"sessions": int(n), "plan": plan["points"],
                  "plan_wall_s": int(open(os.path.join(out, f"plan-{n}.wall")).read()) / 1000,
                  "replay": [dict(pool_tokens=int(s), **replayed(n, s)) for s in sizes.split()]})
print(json.dumps(loads))
PY
}

settings() {  # settings SEED: the plan and replay commands, as the results record them
  /usr/bin/python3 -c 'import json, sys; c = "--synth 393 --seed " + sys.argv[1] + " --duration " + sys.argv[2]
print(json.dumps({"plan": "kvpool plan " + c, "replay": "kvpool replay " + c + " --mode pool"}))' "$1" "$DURATION"
}

if [ "${SEED:-1}" != none ]; then
  loads=$(run_seed "${SEED:-1}")
  /usr/bin/python3 - "$loads" "$(settings "${SEED:-1}")" <<'PY'
import datetime, json, sys
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
json.dump({"command": "scripts/bench-plan.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(), "settings": json.loads(sys.argv[2]), "loads": json.loads(sys.argv[1])},
          open("docs/results/plan.json", "w"), indent=1)
PY
  /usr/bin/python3 scripts/bench_machine.py stamp docs/results/plan.json  # the commit measured
fi
if [ -n "$MORE_SEEDS" ]; then
  seeds=()
  for seed in $MORE_SEEDS; do
    loads=$(run_seed "$seed")
    seeds+=("$seed" "$loads")
  done
  /usr/bin/python3 - "$(settings S)" "${seeds[@]}" <<'PY'
import datetime, json, sys
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
args = sys.argv[2:]
seeds = [{"seed": int(args[i]), "loads": json.loads(args[i + 1])} for i in range(0, len(args), 2)]
json.dump({"command": "MORE_SEEDS=... scripts/bench-plan.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(), "settings": json.loads(sys.argv[1]), "seeds": seeds},
          open("docs/results/plan-seeds.json", "w"), indent=1)
PY
  /usr/bin/python3 scripts/bench_machine.py stamp docs/results/plan-seeds.json
fi
/usr/bin/python3 scripts/render_plan_benchmarks.py
echo "bench-plan: docs/results/plan.json and docs/benchmarks.md updated"
