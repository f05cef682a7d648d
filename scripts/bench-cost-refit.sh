#!/usr/bin/env bash
# The published deployment replayed with the prefill curve scaled from the real model (issue 43:
# docs/results/cost-model-check.json's published_scaling, from scripts/check_cost_model.py) beside
# the calibration's, in one run: the single server at 56-112 sessions and the four-server cluster
# (shared pool) at 96, each with three prefill curves: the calibration's (calibration), both terms
# scaled (scaled), the linear term scaled and the calibration's attention (scaled-linear).
# Emulated times; the replay is deterministic per seed.
# Writes docs/results/cost-refit.json and renders its section of docs/benchmarks.md.
#
#   scripts/bench-cost-refit.sh
#   SESSIONS=56 CLUSTER_SESSIONS= scripts/bench-cost-refit.sh     # a quick one, no cluster
# Env: BUILD (default build), OUT (default bench-results/cost-refit), SESSIONS, CLUSTER_SESSIONS, SEED.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results/cost-refit}
SESSIONS=${SESSIONS:-56,72,96,112}
CLUSTER_SESSIONS=${CLUSTER_SESSIONS-96}
SEED=${SEED:-1}
KVPOOL="$BUILD/src/cli/kvpool"
[ -x "$KVPOOL" ] || { echo "bench-cost-refit: $KVPOOL not built (cmake --build $BUILD --target kvpool)" >&2; exit 1; }
flag() {  # flag KEY: published_scaling[KEY] of docs/results/cost-model-check.json
  /usr/bin/python3 -c 'import json, sys
s = json.load(open("docs/results/cost-model-check.json")).get("published_scaling")
sys.exit("bench-cost-refit: no published_scaling in docs/results/cost-model-check.json") if not s else print(s[sys.argv[1]])' "$1"
}
scaled=$(flag prefill_cost_flag)
scaled_linear=$(flag prefill_cost_flag_linear)
mkdir -p "$OUT"
single="replay --synth 393 --seed $SEED --sessions $SESSIONS --duration 600 --mode pool"
cluster="replay --synth 393 --seed $SEED --topology 4x8-6p2d --sessions $CLUSTER_SESSIONS --duration 900 --warmup 3 --mode pool --pool-scope shared"
files=()
# `kvpool replay` exits 3 when a request failed (or a byte failed verification: the JSON says
# which): a curve under which prefill cannot keep up fails requests at the admission gate, a
# result to report, not a broken run. Any other failure stops the benchmark.
replay() {  # replay OUT ARGS...
  local out=$1; shift
  local rc=0
  "$KVPOOL" --log-level warn "$@" --json "$out.json" > "$out.txt" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "bench-cost-refit: kvpool $* exited $rc" >&2; exit 1; }
}
for cost in calibration scaled scaled-linear; do
  extra=()
  [ "$cost" = scaled ] && extra=(--prefill-cost "$scaled")
  [ "$cost" = scaled-linear ] && extra=(--prefill-cost "$scaled_linear")
  # shellcheck disable=SC2086  # the commands above are word lists
  replay "$OUT/single-$cost" $single "${extra[@]}"
  files+=("single-$cost")
  if [ -n "$CLUSTER_SESSIONS" ]; then
    # shellcheck disable=SC2086
    replay "$OUT/cluster-$cost" $cluster "${extra[@]}"
    files+=("cluster-$cost")
  fi
done
/usr/bin/python3 - "$OUT" "${files[@]}" <<'EOF'
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
runs = []
for name in names:
    with open(os.path.join(out, name + ".json")) as f:
        for run in json.load(f)["runs"]:
            run["cost"] = name.split("-", 1)[1]
            runs.append(run)
with open("docs/results/cost-refit.json", "w") as f:
    json.dump({"runs": runs}, f, indent=1)
EOF
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/cost-refit.json \
  --command "scripts/bench-cost-refit.sh (kvpool $single; kvpool $cluster; each as is, with --prefill-cost $scaled and with --prefill-cost $scaled_linear)"
/usr/bin/python3 scripts/check_cost_model.py --render-only
echo "bench-cost-refit: results in $OUT; wrote docs/results/cost-refit.json and docs/benchmarks.md"
