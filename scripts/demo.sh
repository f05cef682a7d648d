#!/usr/bin/env bash
# The main job on the embedded default: builds kvpool, starts `kvpool serve` (a master and a
# 1 GiB storage service in one process), round-trips a file through the pool, shows the pool's
# state and runs a short benchmark against it, stops the server; then a short agent replay
# (embedded pool, emulated compute, real and verified KV movement) with and without the pool,
# and its plots.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "$(nproc)" kvpool >/dev/null
KVPOOL=build/src/cli/kvpool
WORK=$(mktemp -d)
PORT=${KVPOOL_PORT:-50051}
export KVPOOL_MASTER=127.0.0.1:$PORT

$KVPOOL serve --memory "${KVPOOL_MEMORY:-1GiB}" --listen "$KVPOOL_MASTER" --metrics-listen 127.0.0.1:0 \
  --shm-dir "$WORK" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
cleanup() { kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 100); do
  $KVPOOL stat --timeout-ms 200 2>/dev/null | grep -q "segment" && break  # master up, store mounted
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.log"; exit 1; }
  sleep 0.2
done
echo "== kvpool serve is up (log: pre-fault and mount)"
cat "$WORK/serve.log"

echo "== put/get round trip of a 8 MiB random file"
head -c 8M /dev/urandom >"$WORK/in.bin"
$KVPOOL put demo/file "$WORK/in.bin"
$KVPOOL get demo/file "$WORK/out.bin"
cmp "$WORK/in.bin" "$WORK/out.bin" && echo "round trip OK: bytes identical"
$KVPOOL stat

echo "== benchmark (same-host shm path, then tcp), medians of 3 repetitions"
for size in 64KiB 1MiB; do
  $KVPOOL bench --value-size $size --batch 8 --bytes 256MiB --repeat 3
  $KVPOOL bench --value-size $size --batch 8 --bytes 256MiB --repeat 3 --no-shm
done

kill "$SERVE_PID" && wait "$SERVE_PID" 2>/dev/null || true  # the replay starts its own embedded pool

echo "== agent replay: 16 sessions of a synthetic coding-agent corpus, with and without the pool"
PLOTS=${KVPOOL_DEMO_OUT:-out/demo}
mkdir -p "$PLOTS"
# A 1.5M-token GPU prefix cache per prefill instance: smaller than 16 sessions' history, as on
# a loaded server, so a short run shows what the pool serves (the full sweep is
# scripts/bench-replay.sh).
$KVPOOL --log-level warn replay --synth 393 --sessions 16 --duration 300 --mode both \
  --prefill-cache-tokens 1500000 --json "$PLOTS/replay.json"
$KVPOOL report "$PLOTS/replay.json" --out "$PLOTS"
echo "== replay results: $PLOTS/replay.json; plots: $PLOTS/*.png"
