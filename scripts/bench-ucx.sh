#!/usr/bin/env bash
# The UCX transport (issue 20) against what it is measured by, in one run, for 64 KiB, 1 MiB
# and 8 MiB values (kvpool_transfer_bench --ucx: one process, every case interleaved):
#   ucx over UCX's tcp on loopback  vs  kvpool's tcp transport  vs  iperf3 (1 and 4 streams)
#   ucx over UCX's shared memory    vs  kvpool's shm transport  vs  memcpy
# UCX's tcp runs twice: with its defaults, and with 256 KiB segments (UCX_TCP_TX_SEG_SIZE and
# UCX_TCP_RX_SEG_SIZE; its default is 8 KiB). iperf3 runs before and after the benchmark.
# RDMA is not measured: this machine has no RDMA device.
# Raw results: docs/results/ucx-transport.json, rendered into docs/benchmarks.md by
# scripts/render_ucx_benchmarks.py.
#
# usage: [REPS=7] [BUILD=build] scripts/bench-ucx.sh   (BUILD: the build folder, scripts/bench_build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-7}
source scripts/bench_build.sh
bench_build kvpool_transfer_bench
BENCH=$BUILD/src/transfer/kvpool_transfer_bench
OUT=$(mktemp -d)
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
iperf3 -s -B 127.0.0.1 -p "$PORT" --forceflush >"$OUT/iperf3-server.log" 2>&1 &
IPERF=$!
trap 'kill $IPERF 2>/dev/null; rm -rf "$OUT"' EXIT
for _ in $(seq 100); do grep -q "Server listening" "$OUT/iperf3-server.log" && break; sleep 0.1; done
iperf() {  # iperf STREAMS LABEL
  iperf3 -c 127.0.0.1 -p "$PORT" -t 3 -P "$1" -J >"$OUT/iperf-$1-$2.json"
}
for r in 1 2 3; do iperf 1 "before$r"; iperf 4 "before$r"; done
echo "== $BENCH --ucx --reps $REPS --json"
"$BENCH" --ucx --reps "$REPS" --json >"$OUT/default.json" 2>"$OUT/default.log"
echo "== UCX_TCP_TX_SEG_SIZE=256k UCX_TCP_RX_SEG_SIZE=256k $BENCH --ucx --reps $REPS --json --only ucx_tcp"
UCX_TCP_TX_SEG_SIZE=256k UCX_TCP_RX_SEG_SIZE=256k "$BENCH" --ucx --reps "$REPS" --json --only ucx_tcp \
  >"$OUT/tuned.json" 2>"$OUT/tuned.log"
for r in 1 2 3; do iperf 1 "after$r"; iperf 4 "after$r"; done
/usr/bin/python3 - "$OUT" "$REPS" <<'PY'
import datetime, glob, json, os, subprocess, sys
out, reps = sys.argv[1:]
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
def iperf(streams):
    runs = sorted(glob.glob(os.path.join(out, f"iperf-{streams}-*.json")))
    return [json.load(open(p))["end"]["sum_received"]["bits_per_second"] / 8e9 for p in runs]
ucx = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True).stdout.splitlines()
result = {
    "date": datetime.date.today().isoformat(),
    "machine": describe_machine(),
    "command": f"REPS={reps} scripts/bench-ucx.sh",
    "ucx_version": ucx[0].split()[-1] if ucx else "?",
    "iperf3_gbps": {"streams_1": iperf(1), "streams_4": iperf(4)},
    "default": json.load(open(os.path.join(out, "default.json"))),
    "tcp_256k_segments": json.load(open(os.path.join(out, "tuned.json"))),
}
with open("docs/results/ucx-transport.json", "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/ucx-transport.json  # the commit measured
/usr/bin/python3 scripts/render_ucx_benchmarks.py
echo "wrote docs/results/ucx-transport.json and the ucx section of docs/benchmarks.md"
