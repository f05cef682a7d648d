#!/usr/bin/env bash
# How well the router's return predictions (--retention session, src/replay/return_predictor.h)
# do on real traces: one replay of the weka sample (src/trace/testdata/weka-sample, eight real
# sessions) with predicted retention hints, and the predictions it scored as each waiting
# thread came back (issue 44). Raw results: docs/results/return-predictions.json, rendered in
# the session-aware section of docs/benchmarks.md by scripts/render_session_aware_benchmarks.py.
#
# usage: [BUILD=build] scripts/bench-return-predictions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
ARGS=(replay --trace src/trace/testdata/weka-sample --sessions 8 --duration 3600 --mode pool --retention session)
"$BUILD"/src/cli/kvpool --log-level warn "${ARGS[@]}" --json "$OUT/replay.json" > "$OUT/replay.txt"
/usr/bin/python3 - "$OUT/replay.json" "kvpool ${ARGS[*]}" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from bench_machine import with_run  # noqa: E402
run = json.load(open(sys.argv[1]))["runs"][0]
doc = with_run({"replay": sys.argv[2], "requests": run["requests"], "return_predictions": run["return_predictions"],
                "verification_errors": run["verification_errors"], "failed_requests": run["failed_requests"]},
               command="scripts/bench-return-predictions.sh")
json.dump(doc, open("docs/results/return-predictions.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/render_session_aware_benchmarks.py
echo "bench-return-predictions: docs/results/return-predictions.json and docs/benchmarks.md updated"
