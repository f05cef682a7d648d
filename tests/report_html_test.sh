#!/usr/bin/env bash
# kvpool report's HTML page, opened the way a person opens it: in a browser (Debian's chromium,
# headless). Every plot must load (each image marks itself, the page counts them) and the page
# must show the run's figures, for a sweep of load points with the published figures drawn too,
# and for a single load point (drawn as bars).
# usage: report_html_test.sh KVPOOL_BINARY SOURCE_DIR
set -euo pipefail
KVPOOL=$(realpath "$1") SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v chromium >/dev/null || fail "chromium not found (apt-get install chromium)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$SRC/docs/results/replay-synthetic.json
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
d["runs"] = [r for r in d["runs"] if r["sessions"] == d["runs"][0]["sessions"]]
json.dump(d, open(sys.argv[2], "w"))' "$results" "$work/one.json"
check() {  # check NAME RESULTS [FLAGS]: the report of RESULTS, opened in chromium
  local name=$1 input=$2; shift 2
  "$KVPOOL" report "$input" --out "$work/$name" "$@" >"$work/$name.log" 2>&1 || fail "kvpool report: $(cat "$work/$name.log")"
  for f in report.html throughput.png token_sources.png ttft.png; do [ -s "$work/$name/$f" ] || fail "$name: no $f"; done
  local dom
  dom=$(chromium --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
          --dump-dom "file://$work/$name/report.html" 2>/dev/null) || fail "$name: chromium could not open the page"
  grep -q 'data-plots-loaded="3"' <<<"$dom" || fail "$name: not every plot loaded: $(grep -o 'data-plots-loaded="[0-9]*"' <<<"$dom")"
  # Every run's throughput and pool share, as the JSON has them, are on the page.
  /usr/bin/python3 -c '
import json, sys
dom = sys.stdin.read()
for r in json.load(open(sys.argv[1]))["runs"]:
    cells = ["%.0f" % r["throughput_tok_s_per_gpu"], "%.1f" % (100 * r["token_sources"]["pool_share"])]
    for cell in cells:
        if "<td>%s</td>" % cell not in dom:
            sys.exit("%s: the page does not show %s (%s sessions, %s)" % (sys.argv[2], cell, r["sessions"], r["mode"]))
' "$input" "$name" <<<"$dom" || fail "$name: figures missing"
}
check sweep "$results" --published
check single "$work/one.json"
echo "report html: the sweep and a single load point open in chromium with every plot and figure"
