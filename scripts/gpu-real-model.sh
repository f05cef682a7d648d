#!/usr/bin/env bash
# A real model on a real GPU with kvpool (issue 43), on a GPU machine with PyTorch and
# transformers: the Python module built and the GPU tests of kvpool_transformers run (gpu-check's
# torch step), a `kvpool serve` pool started on this host, then the benchmarks against it:
#   pool           bench/gpu/real_model_pool.py: restore from the pool vs recompute, 8K-128K
#   deterministic  the same under torch.use_deterministic_algorithms(True) (exactness)
#   turns          bench/gpu/real_model_turns.py: real AgentX sessions turn by turn, with and without the pool
#   probe          bench/gpu/real_model_probe.py: the bound (pinned host memory, no pool), default kernels
# A step named with -lower-right (pool-lower-right, turns-lower-right, ...) runs with kvpool_attention's
# lower-right causal attention (--attention lower-right) and writes NAME-lower-right.json.
# STEPS picks them, run in that order (default "pool turns deterministic"); HISTORIES (DET_HISTORIES for
# the deterministic step), TRACES and MAX_TURNS pass on. Each benchmark rewrites its JSON after every row, so a run cut short keeps them.
# Raw results land in $OUT (default ./out/real-model); back here, copy them to docs/results/ and
# run scripts/render_real_model.py. Programs come from .gpu-bundle (scripts/gpu-bundle.sh with
# PROGRAMS=kvpool) or a full build, as scripts/gpu-check.sh finds them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/real-model}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
STEPS=${STEPS:-"pool turns deterministic"}
status=0

OUT="$OUT/gpu-check" CHECKS=${CHECKS:-torch} scripts/gpu-check.sh || status=1  # CHECKS=none: only build the module
if [ -d build-py ]; then PYMOD=$PWD/build-py; KVPOOL=.gpu-bundle/bin/kvpool
else PYMOD=$PWD/build-gpu/python; KVPOOL=build-gpu/src/cli/kvpool; fi
export PYTHONPATH=$PYMOD:$PWD/python LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUBLAS_WORKSPACE_CONFIG=:4096:8  # needed by --deterministic; harmless otherwise

# The pool: one master and one storage service in a process, its segment shared with the client.
shm=$(mktemp -d)
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$KVPOOL" serve --memory "${POOL_MEMORY:-48GiB}" --listen "127.0.0.1:$port" --metrics-listen "" --shm-dir "$shm" \
  > "$OUT/serve.log" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$shm"' EXIT
for _ in $(seq 600); do "$KVPOOL" stat --master "127.0.0.1:$port" --timeout-ms 200 >/dev/null 2>&1 && break; sleep 0.2; done
"$KVPOOL" stat --master "127.0.0.1:$port" > "$OUT/pool-stat.txt" 2>&1 || { echo "FAIL: kvpool serve"; tail "$OUT/serve.log"; exit 1; }

step() {  # step NAME SCRIPT ARGS...: runs one benchmark, its output in $OUT/NAME$suffix.{json,log}
  local name=$1$suffix script=$2; shift 2
  echo "== $name"
  if timeout 900 "$PY" "$script" --pool "127.0.0.1:$port" --out "$OUT/$name.json" "$@" $attention \
       > "$OUT/$name.log" 2>&1; then
    echo "$name: ok"
  else
    echo "$name: FAIL"; status=1; tail -30 "$OUT/$name.log"
  fi
}
histories=${HISTORIES:-8192,32768,65536,131072}
for s in $STEPS; do  # in the order given
  suffix="" attention=""
  case $s in *-lower-right) s=${s%-lower-right} suffix=-lower-right attention="--attention lower-right" ;; esac
  case $s in
    pool) step real-model-pool bench/gpu/real_model_pool.py --histories "$histories" ;;
    deterministic) step real-model-pool-deterministic bench/gpu/real_model_pool.py --deterministic \
                     --histories "${DET_HISTORIES:-$histories}" ;;
    turns) step real-model-turns bench/gpu/real_model_turns.py --traces "${TRACES:-trace_0174,trace_0058,trace_0001}" \
             --max-turns "${MAX_TURNS:-6}" ;;
    probe) echo "== real-model (no pool)"
           timeout 900 "$PY" bench/gpu/real_model_probe.py --histories "$histories" --out "$OUT/real-model$suffix.json" \
             $attention > "$OUT/real-model$suffix.log" 2>&1 || { echo "real-model: FAIL"; status=1; } ;;
    *) echo "gpu-real-model: unknown step $s (pool, deterministic, turns, probe)"; exit 2 ;;
  esac
done
"$KVPOOL" stat --master "127.0.0.1:$port" >> "$OUT/pool-stat.txt" 2>&1
echo "results in $OUT; exit $status"
exit $status
