#!/usr/bin/env bash
# Restore prefetch in the replay (issue 18), in one run: runs of `kvpool replay` with the same
# corpus, seed, load and window, at each session count of SESSIONS and pool size of SIZES, with
# the restore starting when prefill starts a request (--prefetch off) and when the request
# arrives (--prefetch on: it overlaps the request's waits at the admission gate and in the
# prefill queue). Target (issue 18): at 112 sessions, prefetch cuts the restore time on the
# critical path (a request's start in prefill to its last stage restored) by >= 50%. Raw
# results: docs/results/prefetch.json, rendered into docs/benchmarks.md by
# scripts/render_prefetch_benchmarks.py.
#
# usage: [SESSIONS="96 112"] [DURATION=600] [SIZES="24000000 32000000"] [BUILD=build] scripts/bench-prefetch.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-96 112}
DURATION=${DURATION:-600}
SIZES=${SIZES:-24000000 32000000}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --seed 1 --duration "$DURATION" --mode pool)
for n in $SESSIONS; do
  for size in $SIZES; do
    for prefetch in off on; do
      echo "== $n sessions, $size tokens, prefetch $prefetch"
      "$BUILD"/src/cli/kvpool replay "${common[@]}" --sessions "$n" --pool-tokens "$size" --prefetch "$prefetch" \
        --json "$OUT/$n-$size-$prefetch.json"
    done
  done
done
/usr/bin/python3 - "$OUT" "$SESSIONS" "$SIZES" "${common[*]}" <<'PY'
import datetime, json, os, sys
out, sessions, sizes, common = sys.argv[1:]
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
def run(name):
    return json.load(open(os.path.join(out, name + ".json")))["runs"][0]
json.dump({"command": "scripts/bench-prefetch.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "settings": {"replay": "kvpool replay " + common},
           "runs": [{"sessions": int(n), "pool_tokens": int(s), "off": run(f"{n}-{s}-off"), "on": run(f"{n}-{s}-on")}
                    for n in sessions.split() for s in sizes.split()]},
          open("docs/results/prefetch.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/render_prefetch_benchmarks.py
echo "bench-prefetch: docs/results/prefetch.json and docs/benchmarks.md updated"
