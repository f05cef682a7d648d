#!/usr/bin/env bash
# The documented long fuzzing run (issue 16): every target of fuzz/ up to RUNS inputs
# (default 10M), each bounded by MAX_SECONDS (default 3600), through scripts/fuzz.sh.
# Raw results: docs/results/fuzz-long.json; rendered into docs/reliability.md.
#
# usage: [RUNS=N] [MAX_SECONDS=S] scripts/bench-fuzz-long.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
export RUNS=${RUNS:-10000000}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
status=0
OUT=$OUT ./scripts/fuzz.sh "${MAX_SECONDS:-3600}" "$@" || status=$?
/usr/bin/python3 - "$OUT/summary.jsonl" "$RUNS" "${MAX_SECONDS:-3600}" <<'PY' > docs/results/fuzz-long.json
import datetime, json, os, subprocess, sys
targets = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(json.dumps({"command": "scripts/bench-fuzz-long.sh", "date": datetime.date.today().isoformat(),
                  "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
                  + f", {os.cpu_count()} cores ({cpu})",
                  "fuzzer": "libFuzzer (clang-16), ASan + UBSan, leak detection on, 10 s per-input timeout",
                  "runs_target": int(sys.argv[2]), "max_seconds": int(sys.argv[3]), "targets": targets}, indent=1))
PY
/usr/bin/python3 scripts/render_reliability.py
exit $status
