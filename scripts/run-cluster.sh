#!/usr/bin/env bash
# The four-server deployment on the namespace cluster (scripts/cluster.sh; root), a short
# experiment 1 in minutes: 4 servers x 4 rails, each (server, rail) a capped veth NIC with a
# storage service behind it; then `kvpool replay --topology 4x8-6p2d` on server 0, once against
# one shared pool (4 masters, one per part, spread over the servers) and once against split
# pools (every server its own 4 masters and stores). Every restore and save is a real transfer
# to those stores, so bytes to other servers' stores cross the capped veths; the emulated
# rails still set the emulated times. The replay is one process on server 0: a split pool's
# reads and writes of servers 1-3's own stores cross the veths too.
# Writes OUT/{shared,split}.json and docs/results/four-server-cluster.json (with the bytes
# each arm's run sent through the fabric's ports, measured from the veth counters).
#
#   scripts/run-cluster.sh                        # 56 sessions, 300 emulated s per arm
#   SESSIONS=24 DURATION=120 scripts/run-cluster.sh
# Env: SESSIONS, DURATION, RAIL_GBPS (default 0.3: the published 400 Gbit/s per NIC scaled by
#      the geometry's 32 of 48,672 B per token, rounded up), OUT (default bench-results/run-cluster),
#      BUILD (default build), SEED.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-56}
DURATION=${DURATION:-300}
SEED=${SEED:-1}
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results/run-cluster}
export RAIL_GBPS=${RAIL_GBPS:-0.3}
export CLUSTER=kvp4 CLUSTER_DIR=/tmp/kvpool-cluster-four SERVERS=4 RAILS=4 PARTS=4 STORE_SERVERS=all
# Each server's pool memory as the embedded run has it: 768 GiB / 48,672 B = 16,942,837 tokens
# at the scaled geometry's 32 B, over the server's 4 stores.
export STORE_MEMORY=135542696
export KVPOOL="$BUILD/src/cli/kvpool"
[ -x "$KVPOOL" ] || { echo "run-cluster: $KVPOOL not built (cmake --build $BUILD --target kvpool)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "run-cluster: needs root (network namespaces)" >&2; exit 1; }
mkdir -p "$OUT" docs/results
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT

fabric_bytes() {  # bytes received by every switch port, i.e. sent by every server NIC
  ip -n "$CLUSTER-fabric" -s -j link show | /usr/bin/python3 -c '
import json, sys
print(sum(l["stats64"]["rx"]["bytes"] for l in json.load(sys.stdin) if l["ifname"].startswith("s")))'
}

COMMON=(--synth 393 --seed "$SEED" --topology 4x8-6p2d --sessions "$SESSIONS" --duration "$DURATION" --warmup 3
        --mode pool)
for arm in shared split; do
  POOLS=$arm scripts/cluster.sh up
  if [ "$arm" = shared ]; then
    POOL_ARGS=(--pool-scope shared --pool-file "$CLUSTER_DIR/pool.conf")
  else
    POOL_ARGS=(--pool-scope split --server-pool-files "$(ls "$CLUSTER_DIR"/pool-s*.conf | sort -V | paste -sd,)")
  fi
  before=$(fabric_bytes)
  scripts/cluster.sh exec 0 "$KVPOOL" --log-level warn replay "${COMMON[@]}" "${POOL_ARGS[@]}" \
    --json "$OUT/$arm.json" | tee "$OUT/$arm.txt"
  echo "$(( $(fabric_bytes) - before ))" >"$OUT/$arm.fabric-bytes"
  scripts/cluster.sh down
done
/usr/bin/python3 - "$OUT" "kvpool replay ${COMMON[*]} --pool-scope shared|split" "$RAIL_GBPS" <<'PY'
import json, os, sys
out, command, gbps = sys.argv[1:4]
arms = []
for arm in ("shared", "split"):
    run = json.load(open(os.path.join(out, arm + ".json")))["runs"][0]
    run["fabric_bytes"] = int(open(os.path.join(out, arm + ".fabric-bytes")).read())
    arms.append(run)
json.dump({"command": command, "rail_gbps": float(gbps), "runs": arms},
          open("docs/results/four-server-cluster.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/four-server-cluster.json  # commit, date, machine
echo "run-cluster: results in $OUT and docs/results/four-server-cluster.json"
