#!/usr/bin/env bash
# Regenerates docs/benchmarks.md (pool core section): kvpool's same-host (shm) and tcp paths
# side by side, in one run, with their baselines: plain memcpy of the same bytes, redis-server
# and memcached over unix sockets (pipelined), raw loopback TCP, and the master's batch calls.
# Every process is real and separate: master, storage service, bench client.
#
# usage: scripts/bench-pool.sh [RESULTS_DIR]   (each program's raw JSON lands there; default
# bench-results/; what the page is drawn from is gathered into docs/results/pool-core.json, committed,
# with the run's commit, command, date and machine)
# Run it on a quiet machine: figures are medians over repetitions, compared as ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${1:-bench-results}
mkdir -p "$RESULTS"
rm -f "$RESULTS"/*.jsonl "$RESULTS"/*.json
cmake -S . -B build -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "$(nproc)" kvpool kvpool_kv_baseline_bench kvpool_master_bench kvpool_transfer_bench >/dev/null
KVPOOL=build/src/cli/kvpool
source scripts/processes.sh

SIZES=${SIZES:-"64KiB 256KiB 1MiB 4MiB 8MiB"}
PHASE_BYTES=${PHASE_BYTES:-512MiB}
REPEAT=${REPEAT:-5}

# A production store host reserves huge pages for its segment (src/store/README.md); do the same
# for the run when we may (root), and give them back afterwards.
OLD_HUGEPAGES=$(cat /proc/sys/vm/nr_hugepages)
if [ -w /proc/sys/vm/nr_hugepages ] && [ "${HUGEPAGES:-1}" = 1 ]; then
  echo 1100 > /proc/sys/vm/nr_hugepages || true
fi
restore_hugepages() { [ -w /proc/sys/vm/nr_hugepages ] && echo "$OLD_HUGEPAGES" > /proc/sys/vm/nr_hugepages || true; }
trap 'cleanup; restore_hugepages' EXIT

echo "== pool: kvpool master + kvpool store (2 GiB) as separate processes"
export KVPOOL_MASTER=127.0.0.1:$(free_port)
$KVPOOL master --listen "$KVPOOL_MASTER" --metrics-listen "" >"$WORK/master.log" 2>&1 & PIDS+=($!)
$KVPOOL store --master "$KVPOOL_MASTER" --memory 2GiB --listen 127.0.0.1:0 --shm-dir "$WORK" >"$WORK/store.log" 2>&1 & PIDS+=($!)
for _ in $(seq 150); do $KVPOOL stat --timeout-ms 200 2>/dev/null | grep -q segment && break; sleep 0.2; done
grep -h "pre-faulted" "$WORK/store.log" | sed 's/.*segment /segment /' | tee "$RESULTS/store-backing.txt" || true
for size in $SIZES; do
  $KVPOOL bench --json --value-size "$size" --batch 8 --bytes "$PHASE_BYTES" --repeat "$REPEAT" | tee -a "$RESULTS/pool-shm.jsonl"
  $KVPOOL bench --json --value-size "$size" --batch 8 --bytes "$PHASE_BYTES" --repeat "$REPEAT" --no-shm | tee -a "$RESULTS/pool-tcp.jsonl"
done
for batch in 32 128; do  # small values: how far batching amortises the metadata round trip
  $KVPOOL bench --json --value-size 64KiB --batch "$batch" --bytes "$PHASE_BYTES" --repeat "$REPEAT" | tee -a "$RESULTS/pool-shm-batches.jsonl"
done

echo "== redis-server and memcached on unix sockets"
redis-server --port 0 --unixsocket "$WORK/redis.sock" --save "" --appendonly no --logfile "$WORK/redis.log" & PIDS+=($!)
memcached -s "$WORK/memcached.sock" -m 3072 -I 16m -t 2 -u root >"$WORK/memcached.log" 2>&1 & PIDS+=($!)
for _ in $(seq 50); do [ -S "$WORK/redis.sock" ] && [ -S "$WORK/memcached.sock" ] && break; sleep 0.1; done
for size in $SIZES; do
  build/bench/kvpool_kv_baseline_bench --redis "$WORK/redis.sock" --value-size "$size" --batch 8 --bytes "$PHASE_BYTES" --repeat "$REPEAT" | tee -a "$RESULTS/redis.jsonl"
  build/bench/kvpool_kv_baseline_bench --memcached "$WORK/memcached.sock" --value-size "$size" --batch 8 --bytes "$PHASE_BYTES" --repeat "$REPEAT" | tee -a "$RESULTS/memcached.jsonl"
done

echo "== transfer engine alone vs raw loopback tcp and memcpy (in one process)"
build/src/transfer/kvpool_transfer_bench --reps 7 --json | tee "$RESULTS/transfer.json"

echo "== master: BatchExists (1,000-key batches) and BatchPutStart+End (128) with 4 client threads"
build/bench/kvpool_master_bench --threads 4 --seconds 3 --json | tee "$RESULTS/master.json"

/usr/bin/python3 - "$RESULTS" "scripts/bench-pool.sh${1:+ $1}" <<'PY'
import json, os, shlex, sys
sys.path.insert(0, "scripts")
from bench_machine import describe_run  # noqa: E402
results, command = sys.argv[1:3]
settings = [f"{k}={shlex.quote(os.environ[k])}" for k in ("SIZES", "PHASE_BYTES", "REPEAT", "HUGEPAGES") if k in os.environ]
command = " ".join(settings + [command])
def lines(name):
    path = os.path.join(results, name)
    return [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
backing = os.path.join(results, "store-backing.txt")
doc = {"command": command, **describe_run(),
       "store_backing": open(backing).read().strip() if os.path.exists(backing) else None,
       "shm": lines("pool-shm.jsonl"), "tcp": lines("pool-tcp.jsonl"), "shm_batches": lines("pool-shm-batches.jsonl"),
       "redis": lines("redis.jsonl"), "memcached": lines("memcached.jsonl"),
       "transfer": json.load(open(os.path.join(results, "transfer.json"))),
       "master": json.load(open(os.path.join(results, "master.json")))}
with open("docs/results/pool-core.json", "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
PY
/usr/bin/python3 scripts/render_benchmarks.py
echo "== wrote docs/results/pool-core.json and the pool section of docs/benchmarks.md"
