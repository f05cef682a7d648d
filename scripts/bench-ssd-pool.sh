#!/usr/bin/env bash
# One pipeline stage's share read back through the pool from DRAM and from the SSD tier, in one
# run (issue 17): kvpool_ssd_pool_bench (bench/ssd_pool_bench.cc: real masters, stores with SSD
# tiers on files in SSD_DIR, the real client; the tier read from its file by the client, through
# the store over tcp, and loaded into DRAM first; every byte compared with what was put), and
# fio reading as many bytes from a file in the same folder at the object size, queue depth 8,
# O_DIRECT, as the disk's own figure. Raw results: docs/results/ssd-pool.json, rendered into
# docs/benchmarks.md by scripts/render_ssd_benchmarks.py.
#
# usage: [SSD_DIR=/var/tmp] [SHARE=1536MiB] [OBJECT=4MiB] [REPS=5] [BUILD=build] scripts/bench-ssd-pool.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SSD_DIR=${SSD_DIR:-/var/tmp}
SHARE=${SHARE:-1536MiB}
OBJECT=${OBJECT:-4MiB}
REPS=${REPS:-5}
command -v fio >/dev/null || { echo "bench-ssd-pool: fio not found (apt-get install fio)" >&2; exit 2; }
source scripts/bench_build.sh
bench_build kvpool_ssd_pool_bench
FILE=$(mktemp -p "$SSD_DIR" kvpool-ssd-pool-fio.XXXXXX)
POOL=$(mktemp) FIO=$(mktemp)
trap 'rm -f "$FILE" "$POOL" "$FIO"' EXIT
"$BUILD"/bench/kvpool_ssd_pool_bench --dir "$SSD_DIR" --share "$SHARE" --object "$OBJECT" --reps "$REPS" >"$POOL"
fio --name=share --filename="$FILE" --ioengine=io_uring --direct=1 --rw=randread --bs="${OBJECT/iB/}" --iodepth=8 \
  --size="${SHARE/iB/}" --loops="$REPS" --output-format=json >"$FIO"
/usr/bin/python3 - "$POOL" "$FIO" "$SSD_DIR" <<'PY'
import datetime, json, os, subprocess, sys
pool, fio, ssd_dir = sys.argv[1:]
fs = subprocess.run(["df", "--output=fstype,source", ssd_dir], capture_output=True, text=True).stdout.split("\n")[1].split()
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
job = json.load(open(fio))["jobs"][0]["read"]
json.dump({"command": "scripts/bench-ssd-pool.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "filesystem": f"{fs[0]} on {fs[1]}" if len(fs) == 2 else "?",
           "fio": subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
           "pool": json.load(open(pool)),
           "fio_read_gbps": job["bw_bytes"] / 1e9},
          open("docs/results/ssd-pool.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/ssd-pool.json  # the commit measured
/usr/bin/python3 scripts/render_ssd_benchmarks.py
echo "bench-ssd-pool: docs/results/ssd-pool.json and docs/benchmarks.md updated"
