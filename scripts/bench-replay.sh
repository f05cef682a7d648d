#!/usr/bin/env bash
# The replay sweep: `kvpool replay` at several concurrencies, with the shared pool and
# without it (GPU prefix cache only), on the default scaled geometry and a synthetic corpus
# shaped like the public one; then `kvpool report` plots. Emulated compute, real KV movement
# through an embedded pool; exits non-zero on any verification error or failed request.
# Writes the replay section of docs/benchmarks.md (scripts/render_replay_benchmarks.py).
#
#   scripts/bench-replay.sh                      # 56,72,96,112 sessions, 600 s each, both modes
#   SESSIONS=8,16 DURATION=120 scripts/bench-replay.sh
# Env: BUILD (build dir, default build), OUT (default bench-results/replay), SESSIONS,
#      DURATION (emulated seconds measured per run), TRACES (synthetic traces), SEED, MODE.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results/replay}
SESSIONS=${SESSIONS:-56,72,96,112}
DURATION=${DURATION:-600}
TRACES=${TRACES:-393}
SEED=${SEED:-1}
MODE=${MODE:-both}
KVPOOL="$BUILD/src/cli/kvpool"
[ -x "$KVPOOL" ] || { echo "bench-replay: $KVPOOL not built (cmake --build $BUILD --target kvpool)" >&2; exit 1; }
mkdir -p "$OUT"
COMMAND="kvpool replay --synth $TRACES --seed $SEED --sessions $SESSIONS --duration $DURATION --mode $MODE"
"$KVPOOL" --log-level warn replay --synth "$TRACES" --seed "$SEED" --sessions "$SESSIONS" --duration "$DURATION" \
  --mode "$MODE" --json "$OUT/replay.json" | tee "$OUT/replay.txt"
"$KVPOOL" report "$OUT/replay.json" --out "$OUT" | tee -a "$OUT/replay.txt"
# The raw results are committed beside the page they render (docs/results/), with the run's
# command, commit, date and machine.
mkdir -p docs/results && cp "$OUT/replay.json" docs/results/replay-synthetic.json
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/replay-synthetic.json --command "$COMMAND"
# docs/benchmarks.md's replay section (and docs/img/replay-*.png).
/usr/bin/python3 scripts/render_replay_benchmarks.py "$OUT"
echo "bench-replay: results and plots in $OUT; wrote docs/benchmarks.md"
