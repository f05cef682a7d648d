#!/usr/bin/env bash
# The pool across hosts, measured on the namespace cluster (scripts/cluster.sh; root), with the
# rails uncapped and capped, everything in one run:
#   1. client on server 0 -> stores on server 1 over one rail: kvpool tcp PUT/GET (1 MiB,
#      8 MiB values) vs iperf3 over the same veth pair (1 and 4 streams, both directions);
#   2. restore of a 4-stage prefix spread over 4 parts on 4 rails vs the same bytes from one
#      part (kvpool_pool_parts_bench --stage-parts 1,1,1,1: part 1, whose master, like part
#      3's, is on server 1, across the network from the client);
#   3. prefix lookup across 4 parts' masters vs one (p50/p99), from the same runs.
# Raw results: docs/results/cluster.json; docs/benchmarks.md is rendered from it
# (scripts/render_cluster_benchmarks.py).
#
#   scripts/bench-cluster.sh [CAPPED_GBPS]     (default 2: each NIC capped at 2 Gbit/s per direction)
set -euo pipefail
cd "$(dirname "$0")/.."
CAPPED=${1:-2}
REPEAT=${REPEAT:-5}
export CLUSTER=kvpbench CLUSTER_DIR=/tmp/kvpool-bench-cluster SERVERS=2 RAILS=4 PARTS=4 STORE_SERVERS=1
export STORE_MEMORY=${STORE_MEMORY:-512MiB}
KVPOOL=build/src/cli/kvpool
cmake -S . -B build -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "$(nproc)" kvpool kvpool_pool_parts_bench >/dev/null
command -v iperf3 >/dev/null || { echo "bench-cluster.sh: needs iperf3 (apt-get install iperf3)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
in0() { scripts/cluster.sh exec 0 "$@"; }

# iperf3 from server 0 to server 1's rail-0 address (server in server 1); prints Gbit/s.
iperf() {  # iperf STREAMS [-R]
  in0 iperf3 -c 10.77.0.2 -p 5201 -t 3 -O 1 -P "$1" ${2:-} --json | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["end"]["sum_received"]["bits_per_second"] / 1e9)'
}

run_arm() {  # run_arm LABEL GBPS
  local label=$1 gbps=$2
  RAIL_GBPS=$gbps scripts/cluster.sh up >/dev/null
  # Part 0 alone is server 1's rail-0 store: the same veth pair iperf3 uses.
  head -n 1 "$CLUSTER_DIR/pool.conf" >"$OUT/part0.conf"
  scripts/cluster.sh exec 1 iperf3 -s -B 10.77.0.2 -p 5201 -D --pidfile "$OUT/iperf3.pid"
  for _ in $(seq 1 50); do [ -s "$OUT/iperf3.pid" ] && break; sleep 0.1; done
  local put1 get1 put4 get4
  put1=$(iperf 1) get1=$(iperf 1 -R) put4=$(iperf 4) get4=$(iperf 4 -R)
  kill "$(cat "$OUT/iperf3.pid")"
  echo "{\"arm\": \"$label\", \"rail_gbps\": $gbps, \"iperf3_gbps\": {\"put_1\": $put1, \"get_1\": $get1, \"put_4\": $put4, \"get_4\": $get4}}" \
    >"$OUT/$label-iperf3.json"
  for size in 1MiB 8MiB; do
    in0 "$KVPOOL" bench --pool-file "$OUT/part0.conf" --json --value-size "$size" --batch 8 --bytes 128MiB \
      --repeat "$REPEAT" >>"$OUT/$label-kvpool.jsonl"
  done
  in0 build/bench/kvpool_pool_parts_bench --pool-file "$CLUSTER_DIR/pool.conf" --repeat "$REPEAT" >"$OUT/$label-parts4.json"
  in0 build/bench/kvpool_pool_parts_bench --pool-file "$CLUSTER_DIR/pool.conf" --stage-parts 1,1,1,1 \
    --repeat "$REPEAT" >"$OUT/$label-parts1.json"
  scripts/cluster.sh down >/dev/null
}

echo "== uncapped rails"
run_arm uncapped 0
echo "== rails capped at $CAPPED Gbit/s"
run_arm capped "$CAPPED"

/usr/bin/python3 - "$OUT" "$CAPPED" <<'EOF'
import datetime, json, os, platform, sys
out, capped = sys.argv[1], float(sys.argv[2])
def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)
arms = []
for label in ("uncapped", "capped"):
    with open(os.path.join(out, label + "-kvpool.jsonl")) as f:
        kv = [json.loads(line) for line in f if line.strip()]
    arms.append({**load(label + "-iperf3.json"), "kvpool_bench": kv,
                 "restore_4_parts": load(label + "-parts4.json"), "restore_1_part": load(label + "-parts1.json")})
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
result = {"command": "scripts/bench-cluster.sh " + sys.argv[2], "date": datetime.date.today().isoformat(),
          "machine": f"{os.cpu_count()} cores, {cpu}, {platform.release()}",
          "cluster": "2 servers x 4 rails (network namespaces, bridges, veths), 4 parts; stores on server 1, client on server 0",
          "arms": arms}
os.makedirs("docs/results", exist_ok=True)
with open("docs/results/cluster.json", "w") as f:
    json.dump(result, f, indent=1)
print(json.dumps(result, indent=1))
EOF
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/cluster.json  # the commit measured
/usr/bin/python3 scripts/render_cluster_benchmarks.py
