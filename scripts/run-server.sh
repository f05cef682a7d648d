#!/usr/bin/env bash
# The published single-server deployment on one GPU machine, in one command:
#   - a kvpool master and STORES storage services on the host (real processes, shm + tcp),
#   - `kvpool replay --gpu --geometry published --master ...`: one PP4 prefill instance whose
#     stage caches live on the first half of the GPUs (layers 20/20/20/18) and one TP4+DCP4
#     decode instance whose DCP ranks live on the second half, 48,672 B of KV per token, with
#     real restores from the storage services (DMA from their mapped segments), real saves,
#     and real gather -> peer copies (<= 8 MiB) -> scatter handoffs between the GPUs,
#   - a pool-mode replay per entry of SESSIONS (default 56 and 96), then the results.
# On 8 H200s this is the published shape (GPUs 0-3 prefill, 4-7 decode). With fewer GPUs the
# same code runs with several stages or ranks per GPU; the caches are then sized to fit.
#
#   scripts/run-server.sh                       # 56,96 sessions, 600 emulated s each
#   SESSIONS=8 DURATION=120 POOL_GIB=40 scripts/run-server.sh
#
# Env: KVPOOL (default: .gpu-bundle/bin/kvpool, else build-gpu/src/cli/kvpool), OUT
# (default out/server), SESSIONS, DURATION, TRACES (393), STORES (2), POOL_GIB (whole pool;
# default half the host's available memory, at most the published 1.42 TiB),
# PREFILL_CACHE_TOKENS / DECODE_KV_TOKENS (default: the published 9M each, less when the
# GPUs cannot hold it). Exits non-zero on any verification error or failed request.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KVPOOL:-}" ]; then
  if [ -x .gpu-bundle/bin/kvpool ]; then
    KVPOOL=.gpu-bundle/bin/kvpool
    export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    KVPOOL=build-gpu/src/cli/kvpool
  fi
fi
[ -x "$KVPOOL" ] || { echo "run-server: no kvpool at $KVPOOL (scripts/gpu-bundle.sh, or a -DKVPOOL_CUDA=ON build)" >&2; exit 1; }
OUT=${OUT:-out/server}
SESSIONS=${SESSIONS:-56,96}
DURATION=${DURATION:-600}
TRACES=${TRACES:-393}
STORES=${STORES:-2}
mkdir -p "$OUT"

# --- what the machine holds ---------------------------------------------------------------
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "run-server: no NVIDIA GPU visible" >&2; exit 1; }
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | sort -n | head -1)
host_avail_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
# Published: 78 layers x 624 B = 48,672 B per token; the largest stage has 20 layers.
BYTES_PER_TOKEN=48672
STAGE_BYTES_PER_TOKEN=$((20 * 624))
if [ "$gpus" -ge 2 ]; then prefill_gpus=$((gpus / 2)); decode_gpus=$((gpus - prefill_gpus)); share=1; else prefill_gpus=1; decode_gpus=1; share=2; fi
stages_per_gpu=$(((4 + prefill_gpus - 1) / prefill_gpus))
ranks_per_gpu=$(((4 + decode_gpus - 1) / decode_gpus))
usable=$((gpu_mib * 1024 * 1024 / 100 * 80 / share))  # 80% of a GPU (half each when one GPU does both)
fit_prefill=$((usable / (stages_per_gpu * STAGE_BYTES_PER_TOKEN)))
fit_decode=$((usable / ranks_per_gpu * 4 / BYTES_PER_TOKEN))
PREFILL_CACHE_TOKENS=${PREFILL_CACHE_TOKENS:-$((fit_prefill < 9000000 ? fit_prefill : 9000000))}
DECODE_KV_TOKENS=${DECODE_KV_TOKENS:-$((fit_decode < 9000000 ? fit_decode : 9000000))}
POOL_GIB=${POOL_GIB:-$((host_avail_kib / 1024 / 1024 / 2 < 1450 ? host_avail_kib / 1024 / 1024 / 2 : 1450))}
store_gib=$((POOL_GIB / STORES))
[ "$store_gib" -ge 1 ] || { echo "run-server: POOL_GIB=$POOL_GIB is too small for $STORES stores" >&2; exit 1; }
echo "run-server: $gpus GPUs ($gpu_mib MiB each): prefill PP4 on $prefill_gpus, decode DCP4 on $decode_gpus;" \
     "prefill cache $PREFILL_CACHE_TOKENS tokens, decode KV $DECODE_KV_TOKENS tokens, pool $STORES x $store_gib GiB" \
  | tee "$OUT/setup.txt"

# --- the pool: master + storage services ----------------------------------------------------
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
MASTER=127.0.0.1:$port
"$KVPOOL" --log-level warn master --listen "$MASTER" --metrics-listen "" > "$OUT/master.log" 2>&1 &
PIDS+=($!)
start=$(date +%s)
for i in $(seq "$STORES"); do
  "$KVPOOL" --log-level info store --master "$MASTER" --memory "${store_gib}GiB" --listen 127.0.0.1:0 \
    --shm-dir "$WORK" > "$OUT/store-$i.log" 2>&1 &
  PIDS+=($!)
done
# Stores pre-fault their segments before mounting; wait until every one is mounted.
until [ "$("$KVPOOL" stat --json --master "$MASTER" --timeout-ms 500 2>/dev/null | grep -c '"store_id"')" -ge "$STORES" ]; do
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { echo "run-server: a pool process died" >&2; tail -5 "$OUT"/*.log >&2; exit 1; }; done
  sleep 1
done
echo "run-server: pool of $POOL_GIB GiB ready in $(($(date +%s) - start)) s" | tee -a "$OUT/setup.txt"

# --- the replay ------------------------------------------------------------------------------
# GPU memory in use every 10 s, to show where the caches live.
nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv -l 10 > "$OUT/gpu-memory.csv" 2>&1 &
PIDS+=($!)
status=0
"$KVPOOL" --log-level warn replay --gpu --geometry published --master "$MASTER" --synth "$TRACES" \
  --sessions "$SESSIONS" --duration "$DURATION" --mode pool \
  --prefill-cache-tokens "$PREFILL_CACHE_TOKENS" --decode-kv-tokens "$DECODE_KV_TOKENS" \
  --json "$OUT/server.json" | tee "$OUT/server.txt" || status=$?
echo "run-server: results in $OUT (exit $status)"
exit "$status"
