#!/usr/bin/env bash
# The published four-server experiment (issue: four servers, shared pool vs split pool), on the
# emulated 4 x 8-GPU cluster: 6 prefill + 2 decode instances in two groups (`--topology
# 4x8-6p2d`), a router per group placing every request by power of two choices, and the pool
# either shared over every server's memory (4 parts by rail) or split, one per server. Both
# arms at each load in one run; emulated compute, real KV movement through embedded pools,
# every restored and handed-off byte verified; traffic between servers pays the emulated
# rails. Then the fidelity check of the single-server no-pool collapse: the same loads with
# every lane started at once (the published warm-up) and with the starts spread out.
# Writes docs/results/four-server.json, docs/results/fidelity.json, docs/img/four-server-*.png
# and the four-server section of docs/benchmarks.md (scripts/render_four_server_benchmarks.py).
#
#   scripts/bench-four-server.sh                          # 56,72,96,112 sessions, 900 s each
#   SESSIONS=56 DURATION=120 FIDELITY=0 scripts/bench-four-server.sh   # a short look
# Env: BUILD (default build), OUT (default bench-results/four-server), SESSIONS, DURATION
#      (emulated seconds measured per run), TRACES, SEED, FIDELITY (0: skip the check), RAMP.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results/four-server}
SESSIONS=${SESSIONS:-56,72,96,112}
DURATION=${DURATION:-900}
TRACES=${TRACES:-393}
SEED=${SEED:-1}
FIDELITY=${FIDELITY:-1}
RAMP=${RAMP:-900}
KVPOOL="$BUILD/src/cli/kvpool"
[ -x "$KVPOOL" ] || { echo "bench-four-server: $KVPOOL not built (cmake --build $BUILD --target kvpool)" >&2; exit 1; }
mkdir -p "$OUT" docs/results
ARGS=(--synth "$TRACES" --seed "$SEED" --topology 4x8-6p2d --sessions "$SESSIONS" --duration "$DURATION" --warmup 3
      --mode pool --pool-scope both)
COMMAND="kvpool replay ${ARGS[*]}"
"$KVPOOL" --log-level warn replay "${ARGS[@]}" --json "$OUT/four-server.json" | tee "$OUT/four-server.txt"
"$KVPOOL" report "$OUT/four-server.json" --out "$OUT" | tee -a "$OUT/four-server.txt"
cp "$OUT/four-server.json" docs/results/four-server.json
FIDELITY_COMMAND=""
if [ "$FIDELITY" = 1 ]; then
  FARGS=(--synth "$TRACES" --seed "$SEED" --sessions 72,112 --duration 600 --mode no-pool)
  FIDELITY_COMMAND="kvpool replay ${FARGS[*]} --ramp 0|$RAMP"
  for ramp in 0 "$RAMP"; do
    "$KVPOOL" --log-level warn replay "${FARGS[@]}" --ramp "$ramp" --json "$OUT/fidelity-ramp$ramp.json" \
      | tee "$OUT/fidelity-ramp$ramp.txt"
  done
  /usr/bin/python3 - "$OUT/fidelity-ramp0.json" "$OUT/fidelity-ramp$RAMP.json" "$RAMP" "$FIDELITY_COMMAND" <<'PY'
import json, sys
together, spread, ramp, command = sys.argv[1:5]
doc = {"command": command, "arms": [{"ramp_s": 0, "runs": json.load(open(together))["runs"]},
                                    {"ramp_s": float(ramp), "runs": json.load(open(spread))["runs"]}]}
json.dump(doc, open("docs/results/fidelity.json", "w"), indent=1)
PY
fi
/usr/bin/python3 scripts/render_four_server_benchmarks.py "$OUT" "$COMMAND"
echo "bench-four-server: results and plots in $OUT; wrote docs/benchmarks.md"
