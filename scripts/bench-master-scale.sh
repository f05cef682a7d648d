#!/usr/bin/env bash
# The master holding a large pool (issue 15, "Scale"): kvpool_master_bench with 10 million
# resident objects (connector-shaped 52-byte keys, 4 KiB values, segments that are endpoint
# records only) for bytes per object and lookups over loopback gRPC; eviction pass cost at two
# pool sizes; RejoinSegment of one segment's 1 million index entries.
# Raw results: docs/results/master-scale.json; rendered into docs/benchmarks.md.
#
# usage: scripts/bench-master-scale.sh [RESIDENT]
set -euo pipefail
cd "$(dirname "$0")/.."
RESIDENT=${1:-10000000}
ninja -C build kvpool_master_bench >/dev/null
BENCH=build/bench/kvpool_master_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

LOOKUP_ARGS="--resident $RESIDENT --threads 4 --seconds 3 --repeats 3 --phases exists,get"
SCALE_ARGS="--phases evict,rebuild --evict-pools 1000000,$RESIDENT --evict-units 1000 --evict-passes 9 --rebuild-objects ${REBUILD:-1000000} --rebuild-runs 5"
$BENCH $LOOKUP_ARGS --json >"$WORK/lookup.json"
$BENCH $SCALE_ARGS --json >"$WORK/scale.json"

/usr/bin/python3 - "$WORK" "$LOOKUP_ARGS" "$SCALE_ARGS" <<'PY' > docs/results/master-scale.json
import datetime, json, os, subprocess, sys
work, lookup_args, scale_args = sys.argv[1:4]
lookup = json.load(open(os.path.join(work, "lookup.json")))
scale = json.load(open(os.path.join(work, "scale.json")))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(json.dumps({
    "command": "scripts/bench-master-scale.sh",
    "runs": [f"kvpool_master_bench {lookup_args} --json", f"kvpool_master_bench {scale_args} --json"],
    "date": datetime.date.today().isoformat(),
    "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
               + f", {os.cpu_count()} cores ({cpu}), "
               + f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB",
    "lookup": lookup, "scale": scale}, indent=1))
PY
/usr/bin/python3 scripts/bench_machine.py stamp docs/results/master-scale.json  # the commit measured
/usr/bin/python3 scripts/render_master_scale.py
echo "== wrote docs/results/master-scale.json and the master-scale section of docs/benchmarks.md"
