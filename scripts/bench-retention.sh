#!/usr/bin/env bash
# Session-aware retention against plain LRU in the replay (issue 18), in one run: runs of
# `kvpool replay` with the same corpus, seed, load and window, at each pool size of SIZES, with
# the pool's plain LRU (--retention lru) and with the router's hints (--retention session: a
# session waiting for its next turn keeps its history over others' churn for about its recorded
# wait, an ended one's goes first). Target (issue 18): at 112 sessions and a pool of about half
# the working set, session retention >= +5 points of reuse over LRU; no regression at the
# default size. Raw results: docs/results/retention.json, rendered into docs/benchmarks.md by
# scripts/render_retention_benchmarks.py.
#
# usage: [SESSIONS=112] [DURATION=600] [SIZES="20000000 24000000 32000000"] [BUILD=build] scripts/bench-retention.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-112}
DURATION=${DURATION:-600}
SIZES=${SIZES:-20000000 24000000 32000000}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --seed 1 --sessions "$SESSIONS" --duration "$DURATION" --mode pool)
for size in $SIZES; do
  for retention in lru session; do
    echo "== $retention at $size tokens: kvpool replay ${common[*]} --pool-tokens $size --retention $retention"
    "$BUILD"/src/cli/kvpool replay "${common[@]}" --pool-tokens "$size" --retention "$retention" \
      --json "$OUT/$retention-$size.json"
  done
done
/usr/bin/python3 - "$OUT" "$SIZES" "${common[*]}" <<'PY'
import datetime, json, os, subprocess, sys
out, sizes, common = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
def run(name):
    return json.load(open(os.path.join(out, name + ".json")))["runs"][0]
json.dump({"command": "scripts/bench-retention.sh", "date": datetime.date.today().isoformat(),
           "machine": subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
                      + f", {os.cpu_count()} cores ({cpu})",
           "settings": {"replay": "kvpool replay " + common},
           "sizes": [{"pool_tokens": int(s), "lru": run(f"lru-{s}"), "session": run(f"session-{s}")}
                     for s in sizes.split()]},
          open("docs/results/retention.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/render_retention_benchmarks.py
echo "bench-retention: docs/results/retention.json and docs/benchmarks.md updated"
