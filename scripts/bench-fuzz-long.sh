#!/usr/bin/env bash
# The documented long fuzzing run (issue 16): every target of fuzz/ up to RUNS inputs
# (default 10M), each bounded by MAX_SECONDS (default 3600), through scripts/fuzz.sh.
# Raw results: docs/results/fuzz-long.json (a run of some targets replaces only their rows);
# rendered into docs/reliability.md.
#
# usage: [RUNS=N] [MAX_SECONDS=S] scripts/bench-fuzz-long.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
export RUNS=${RUNS:-10000000}
OUT=$(mktemp -d)
status=0
# A failed target's log and input stay for a regression test.
trap 'if [ "$status" = 0 ]; then rm -rf "$OUT"; else echo "bench-fuzz-long: logs and failing inputs kept in $OUT" >&2; fi' EXIT
OUT=$OUT ./scripts/fuzz.sh "${MAX_SECONDS:-3600}" "$@" || status=$?
/usr/bin/python3 - "$OUT/summary.jsonl" "$RUNS" "${MAX_SECONDS:-3600}" <<'PY'
# Targets run now replace their rows; rows of targets not run now are kept with their own date,
# so the slow trace-loader targets can run apart from the rest.
import datetime, json, os, subprocess, sys
path = "docs/results/fuzz-long.json"
today = datetime.date.today().isoformat()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
machine = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip() + f", {os.cpu_count()} cores ({cpu})"
old = json.load(open(path)) if os.path.exists(path) else {"targets": []}
rows = {t["target"]: {"date": old.get("date"), "machine": old.get("machine"), "max_seconds": old.get("max_seconds"), **t}
        for t in old["targets"]}
for line in open(sys.argv[1]):
    t = json.loads(line)
    t.update(date=today, machine=machine, runs_target=int(sys.argv[2]), max_seconds=int(sys.argv[3]))
    rows[t["target"]] = t
json.dump({"command": "scripts/bench-fuzz-long.sh",
           "fuzzer": "libFuzzer (clang-16), ASan + UBSan, leak detection on, 10 s per-input timeout",
           "runs_target": int(sys.argv[2]),
           "targets": sorted(rows.values(), key=lambda t: t["target"])}, open(path, "w"), indent=1)
PY
/usr/bin/python3 scripts/render_reliability.py
exit $status
