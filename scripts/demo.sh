#!/usr/bin/env bash
# The main job on the embedded default: builds kvpool, starts `kvpool serve` (a master and a
# 1 GiB storage service in one process), round-trips a file through the pool, shows the pool's
# state and runs a short benchmark against it, stops the server; then a short agent replay
# (embedded pool, emulated compute, real and verified KV movement) with and without the pool,
# its plots and report.html.
#
# usage: scripts/demo.sh
# Settings (environment; scripts/test.sh runs the demo with the first three):
#   KVPOOL_PORT=50051              the server's port on 127.0.0.1
#   KVPOOL_DEMO_OUT=out/demo       where the replay's JSON, plots and report.html go
#   KVPOOL_DEMO_DURATION=300       emulated seconds the replay measures
#   KVPOOL_MEMORY=1GiB             the server's segment
#   KVPOOL_BUILD=build             the build folder (configured here if it is not yet)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${KVPOOL_BUILD:-build}
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "== configuring $BUILD (first run only)"
  cmake -S . -B "$BUILD" -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "== building kvpool (the first build takes minutes)"
ninja -C "$BUILD" -j "$(nproc)" kvpool >/dev/null
KVPOOL=$BUILD/src/cli/kvpool
WORK=$(mktemp -d)
MASTER=127.0.0.1:${KVPOOL_PORT:-50051}
OUT=${KVPOOL_DEMO_OUT:-out/demo}
DURATION=${KVPOOL_DEMO_DURATION:-300}

$KVPOOL serve --memory "${KVPOOL_MEMORY:-1GiB}" --listen "$MASTER" --metrics-listen 127.0.0.1:0 \
  --shm-dir "$WORK" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
cleanup() { kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 100); do
  $KVPOOL stat --master "$MASTER" --timeout-ms 200 2>/dev/null | grep -q "segment" && break  # master up, store mounted
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.log"; exit 1; }
  sleep 0.2
done
echo "== kvpool serve is up on $MASTER (its log: pre-fault and mount)"
cat "$WORK/serve.log"

echo "== put/get round trip of a 8 MiB random file"
head -c 8M /dev/urandom >"$WORK/in.bin"
$KVPOOL put --master "$MASTER" demo/file "$WORK/in.bin"
$KVPOOL get --master "$MASTER" demo/file "$WORK/out.bin"
cmp "$WORK/in.bin" "$WORK/out.bin" && echo "round trip OK: bytes identical"
$KVPOOL stat --master "$MASTER"

echo "== benchmark: 64 KiB and 1 MiB values in batches of 8, medians of 3 repetitions"
echo "   shm: a client on the same host copies through the store's shared memory;"
echo "   tcp: the path a client on another host takes (here over loopback)"
for size in 64KiB 1MiB; do
  $KVPOOL bench --master "$MASTER" --value-size $size --batch 8 --bytes 256MiB --repeat 3
  $KVPOOL bench --master "$MASTER" --value-size $size --batch 8 --bytes 256MiB --repeat 3 --no-shm
done

kill "$SERVE_PID" && wait "$SERVE_PID" 2>/dev/null || true  # the replay starts its own embedded pool

echo "== agent replay: 16 sessions of a synthetic coding-agent corpus, with and without the pool"
echo "   (compute is emulated by the cost model; the KV bytes are real, moved through a real pool and verified)"
mkdir -p "$OUT"
# A 1.5M-token GPU prefix cache per prefill instance: smaller than 16 sessions' history, as on
# a loaded server, so a short run shows what the pool serves (the full sweep is
# scripts/bench-replay.sh).
$KVPOOL --log-level warn replay --synth 393 --sessions 16 --duration "$DURATION" --mode both \
  --prefill-cache-tokens 1500000 --json "$OUT/replay.json"
$KVPOOL report "$OUT/replay.json" --out "$OUT" >/dev/null

echo "== what the replay showed (emulated times, real token shares)"
/usr/bin/python3 - "$OUT/replay.json" <<'EOF'
import json, sys
runs = {r["mode"]: r for r in json.load(open(sys.argv[1]))["runs"]}
pool, alone = runs["pool"], runs["no-pool"]
for name, r in (("with the pool", pool), ("GPU cache alone", alone)):
    t = r["token_sources"]
    print(f"  {name:16} {100 * t['reuse']:5.1f}% of prompt tokens not recomputed "
          f"(GPU cache {100 * t['gpu_cache_share']:.1f}%, pool {100 * t['pool_share']:.1f}%); "
          f"TTFT p50 {r['ttft_s']['p50']:.2f} s; {r['throughput_tok_s_per_gpu']:,.0f} tok/s per GPU")
ratio = pool["throughput_tok_s_per_gpu"] / max(alone["throughput_tok_s_per_gpu"], 1e-9)
print(f"  the pool serves what the GPU cache evicted: {ratio:.2f}x the throughput per GPU of the cache alone")
EOF
echo "== done: results $OUT/replay.json; plots $OUT/throughput.png, $OUT/token_sources.png, $OUT/ttft.png;"
echo "   everything on one page: $OUT/report.html"
