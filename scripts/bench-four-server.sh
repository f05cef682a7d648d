#!/usr/bin/env bash
# The published four-server experiment (issue: four servers, shared pool vs split pool), on the
# emulated 4 x 8-GPU cluster: 6 prefill + 2 decode instances in two groups (`--topology
# 4x8-6p2d`), a router per group placing every request by power of two choices, and the pool
# either shared over every server's memory (4 parts by rail) or split, one per server. Both
# arms at each load in one run; emulated compute, real KV movement through embedded pools,
# every restored and handed-off byte verified; traffic between servers pays the emulated
# rails. Experiment 1 is the AgentX sweep (PP4 prefill, closed-loop lanes); experiment 2 the
# production-style replay (TP4 prefill, 160 lanes whose turns arrive as Poisson arrivals, 30 s
# admission wait, output capped at 32,000). Then the same at half the prefill GPU cache (the
# sensitivity the results discuss), and the fidelity check of the single-server no-pool
# collapse: the same loads with every lane started at once and with the starts spread out.
# Writes docs/results/{four-server,production,four-server-half-cache,fidelity}.json (each with
# the run's commit, command, date and machine: scripts/bench_machine.py stamp),
# docs/img/four-server-*.png and the four-server section of docs/benchmarks.md
# (scripts/render_four_server_benchmarks.py).
#
#   scripts/bench-four-server.sh                          # the published loads (about 50 min)
#   SESSIONS=56 DURATION=120 RATES=1.0 PRODUCTION_DURATION=120 EXTRA=0 scripts/bench-four-server.sh
# Env: BUILD (default build), OUT (default bench-results/four-server), SESSIONS, DURATION
#      (emulated seconds measured per run), RATES, LANES, PRODUCTION_DURATION, TRACES, SEED,
#      EXTRA (0: skip the half-cache runs and the fidelity check), RAMP, MORE_SEEDS (default "2 3":
#      Experiment 1 again at each of these seeds, summarised in docs/results/four-server-seeds.json;
#      "" skips them; about 15 min each).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results/four-server}
SESSIONS=${SESSIONS:-56,72,96,112}
DURATION=${DURATION:-900}
TRACES=${TRACES:-393}
SEED=${SEED:-1}
RATES=${RATES:-0.6,0.8,1.0}
LANES=${LANES:-160}
PRODUCTION_DURATION=${PRODUCTION_DURATION:-1200}
EXTRA=${EXTRA:-1}
HALF_CACHE=4500000
RAMP=${RAMP:-900}
MORE_SEEDS=${MORE_SEEDS-2 3}
KVPOOL="$BUILD/src/cli/kvpool"
[ -x "$KVPOOL" ] || { echo "bench-four-server: $KVPOOL not built (cmake --build $BUILD --target kvpool)" >&2; exit 1; }
mkdir -p "$OUT" docs/results
ARGS=(--synth "$TRACES" --seed "$SEED" --topology 4x8-6p2d --sessions "$SESSIONS" --duration "$DURATION" --warmup 3
      --mode pool --pool-scope both)
COMMAND="kvpool replay ${ARGS[*]}"
"$KVPOOL" --log-level warn replay "${ARGS[@]}" --json "$OUT/four-server.json" | tee "$OUT/four-server.txt"
"$KVPOOL" report "$OUT/four-server.json" --out "$OUT" | tee -a "$OUT/four-server.txt"
cp "$OUT/four-server.json" docs/results/four-server.json
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/four-server.json --command "$COMMAND"
production_args() {  # RATES
  PARGS=(--synth "$TRACES" --seed "$SEED" --topology 4x8-6p2d --sessions "$LANES" --arrival poisson --rate "$1"
         --prefill tp4 --duration "$PRODUCTION_DURATION" --warmup 0 --admission-wait 30 --max-output 32000
         --mode pool --pool-scope both)
}
production_args "$RATES"
PRODUCTION_COMMAND="kvpool replay ${PARGS[*]}"
"$KVPOOL" --log-level warn replay "${PARGS[@]}" --json "$OUT/production.json" | tee "$OUT/production.txt"
cp "$OUT/production.json" docs/results/production.json
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/production.json --command "$PRODUCTION_COMMAND"
FIDELITY_COMMAND=""
HALF_COMMAND=""
if [ "$EXTRA" = 1 ]; then
  # Half the prefill GPU cache: the highest AgentX load and the highest production rate.
  HARGS=(--synth "$TRACES" --seed "$SEED" --topology 4x8-6p2d --sessions 112 --duration "$DURATION" --warmup 3
         --mode pool --pool-scope both --prefill-cache-tokens "$HALF_CACHE")
  "$KVPOOL" --log-level warn replay "${HARGS[@]}" --json "$OUT/half-agentx.json" | tee "$OUT/half-cache.txt"
  production_args "${RATES##*,}"
  HPARGS=("${PARGS[@]}" --prefill-cache-tokens "$HALF_CACHE")
  "$KVPOOL" --log-level warn replay "${HPARGS[@]}" --json "$OUT/half-production.json" | tee -a "$OUT/half-cache.txt"
  HALF_COMMAND="kvpool replay ${HARGS[*]}|kvpool replay ${HPARGS[*]}"
  /usr/bin/python3 - "$OUT/half-agentx.json" "$OUT/half-production.json" "$HALF_COMMAND" <<'PY'
import json, sys
agentx, production, command = sys.argv[1:4]
doc = {"command": command, "prefill_cache_tokens": 4500000,
       "agentx": json.load(open(agentx))["runs"], "production": json.load(open(production))["runs"]}
json.dump(doc, open("docs/results/four-server-half-cache.json", "w"), indent=1)
PY
  /usr/bin/python3 scripts/bench_machine.py stamp docs/results/four-server-half-cache.json
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
  /usr/bin/python3 scripts/bench_machine.py stamp docs/results/fidelity.json
fi
if [ -n "$MORE_SEEDS" ]; then
  seed_runs=()
  for seed in $MORE_SEEDS; do
    SARGS=("${ARGS[@]}")
    SARGS[3]=$seed  # --seed's value (ARGS[2] is --seed)
    "$KVPOOL" --log-level warn replay "${SARGS[@]}" --json "$OUT/four-server-seed$seed.json" | tee "$OUT/four-server-seed$seed.txt"
    seed_runs+=("$seed=$OUT/four-server-seed$seed.json")
  done
  /usr/bin/python3 scripts/render_four_server_benchmarks.py --collect-seeds "$COMMAND" "$SEED=$OUT/four-server.json" "${seed_runs[@]}"
  /usr/bin/python3 scripts/bench_machine.py stamp docs/results/four-server-seeds.json
fi
/usr/bin/python3 scripts/render_four_server_benchmarks.py "$OUT"
echo "bench-four-server: results and plots in $OUT; wrote docs/benchmarks.md"
