#!/usr/bin/env bash
# The SSD tier's I/O against fio, in one run (issue 17): random writes, then random reads, of
# distinct block-aligned slots at 1-8 MiB blocks, queue depth 8, O_DIRECT; kvpool's tier file
# (kvpool_ssd_io_bench: ssd/tier_file.h over io_uring) and fio (ioengine=io_uring) on the same
# file, and the tier's objects (ssd/ssd_tier.h: puts and gets of one-block objects, a header
# each) on a file of their own beside it, take turns within each repetition. Raw results: docs/results/ssd-io.json, rendered into
# docs/benchmarks.md by scripts/render_ssd_benchmarks.py.
#
# usage: [SSD_DIR=/var/tmp] [FILE_SIZE=4GiB] [PASS_BYTES=1GiB] [REPS=5] [DEPTH=8] [BUILD=build] scripts/bench-ssd.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SSD_DIR=${SSD_DIR:-/var/tmp}
FILE_SIZE=${FILE_SIZE:-4GiB}
PASS_BYTES=${PASS_BYTES:-1GiB}
REPS=${REPS:-5}
DEPTH=${DEPTH:-8}
BLOCKS=${BLOCKS:-"1MiB 2MiB 4MiB 8MiB"}
command -v fio >/dev/null || { echo "bench-ssd: fio not found (apt-get install fio)" >&2; exit 2; }
source scripts/bench_build.sh
bench_build kvpool_ssd_io_bench
FILE=$(mktemp -p "$SSD_DIR" kvpool-ssd-bench.XXXXXX)
RAW=$(mktemp)
trap 'rm -f "$FILE" "$FILE".objects-* "$RAW"' EXIT

kvpool_pass() {  # kvpool_pass OP BLOCK SEED
  "$BUILD"/bench/kvpool_ssd_io_bench --file "$FILE" --file-size "$FILE_SIZE" --block "$2" --bytes "$PASS_BYTES" \
    --queue-depth "$DEPTH" --op "$1" --seed "$3" --json
}
objects_pass() {  # objects_pass OP BLOCK SEED (a tier file per block size: its slots fit the block)
  "$BUILD"/bench/kvpool_ssd_io_bench --objects --file "$FILE.objects-$2" --file-size "$FILE_SIZE" --block "$2" \
    --bytes "$PASS_BYTES" --queue-depth "$DEPTH" --op "$1" --seed "$3" --json
}
fio_pass() {  # fio_pass OP BLOCK
  fio --name=tier --filename="$FILE" --ioengine=io_uring --direct=1 --rw="rand$1" --bs="${2/iB/}" \
    --iodepth="$DEPTH" --size="${FILE_SIZE/iB/}" --io_size="${PASS_BYTES/iB/}" --output-format=json |
    /usr/bin/python3 -c '
import json, sys
op, block = sys.argv[1], sys.argv[2]
job = json.load(sys.stdin)["jobs"][0][op]
print(json.dumps({"tool": "fio", "op": op, "block_bytes": block, "bytes": job["io_bytes"],
                  "seconds": job["runtime"] / 1e3, "gbps": job["bw_bytes"] / 1e9}))' "$1" "$3"
}
bytes_of() { /usr/bin/python3 -c 'import sys; n, u = sys.argv[1][:-3], sys.argv[1][-3:]; print(int(n) << {"KiB": 10, "MiB": 20, "GiB": 30}[u])' "$1"; }

kvpool_pass write 4MiB 0 >/dev/null  # creates and allocates the file, and warms the device up
for rep in $(seq "$REPS"); do
  for block in $BLOCKS; do
    for op in write read; do
      # Alternate who goes first, so neither always meets a device the other just warmed.
      if [ $((rep % 2)) = 1 ]; then
        kvpool_pass "$op" "$block" "$rep" >>"$RAW"; objects_pass "$op" "$block" "$rep" >>"$RAW"
        fio_pass "$op" "$block" "$(bytes_of "$block")" >>"$RAW"
      else
        fio_pass "$op" "$block" "$(bytes_of "$block")" >>"$RAW"; objects_pass "$op" "$block" "$rep" >>"$RAW"
        kvpool_pass "$op" "$block" "$rep" >>"$RAW"
      fi
    done
  done
  echo "bench-ssd: repetition $rep of $REPS done"
done

/usr/bin/python3 - "$RAW" "$SSD_DIR" "$FILE_SIZE" "$PASS_BYTES" "$DEPTH" "$REPS" <<'PY'
import datetime, json, os, subprocess, sys
raw, ssd_dir, file_size, pass_bytes, depth, reps = sys.argv[1:]
fs = subprocess.run(["df", "--output=fstype,source", ssd_dir], capture_output=True, text=True).stdout.split("\n")[1].split()
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
json.dump({"command": "scripts/bench-ssd.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "filesystem": f"{fs[0]} on {fs[1]}" if len(fs) == 2 else "?",
           "fio": subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
           "settings": {"file_size": file_size, "pass_bytes": pass_bytes, "queue_depth": int(depth), "reps": int(reps)},
           "passes": [json.loads(l) for l in open(raw)]},
          open("docs/results/ssd-io.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/ssd-io.json  # the commit measured
/usr/bin/python3 scripts/render_ssd_benchmarks.py
echo "bench-ssd: docs/results/ssd-io.json and docs/benchmarks.md updated"
