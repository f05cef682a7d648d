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
# Each arm runs REPS times with the same seed: the pool's hints expire in real time, so runs
# differ by a few points; the page reports each arm's median run and the range of its reuse.
#
# usage: [SESSIONS=112] [DURATION=600] [SIZES="20000000 24000000 32000000"] [REPS=3] [BUILD=build] scripts/bench-retention.sh
# (BUILD: the build folder, scripts/bench_build.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-112}
DURATION=${DURATION:-600}
SIZES=${SIZES:-20000000 24000000 32000000}
REPS=${REPS:-3}
source scripts/bench_build.sh
bench_build kvpool
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
common=(--synth 393 --seed 1 --sessions "$SESSIONS" --duration "$DURATION" --mode pool)
for size in $SIZES; do
  for rep in $(seq "$REPS"); do
    for retention in lru session; do
      echo "== $retention at $size tokens, run $rep of $REPS: kvpool replay ${common[*]} --pool-tokens $size --retention $retention"
      "$BUILD"/src/cli/kvpool replay "${common[@]}" --pool-tokens "$size" --retention "$retention" \
        --json "$OUT/$retention-$size-$rep.json"
    done
  done
done
/usr/bin/python3 - "$OUT" "$SIZES" "$REPS" "${common[*]}" <<'PY'
import datetime, json, os, sys
out, sizes, reps, common = sys.argv[1:]
sys.path.insert(0, "scripts")
from bench_machine import describe_machine  # noqa: E402
def arm(name):
    runs = [json.load(open(os.path.join(out, f"{name}-{r}.json")))["runs"][0] for r in range(1, int(reps) + 1)]
    runs.sort(key=lambda r: r["token_sources"]["reuse"])
    return {"median": runs[len(runs) // 2], "reuse_runs": [r["token_sources"]["reuse"] for r in runs]}
json.dump({"command": "scripts/bench-retention.sh", "date": datetime.date.today().isoformat(),
           "machine": describe_machine(),
           "settings": {"replay": "kvpool replay " + common, "repetitions": int(reps)},
           "sizes": [{"pool_tokens": int(s), "lru": arm(f"lru-{s}"), "session": arm(f"session-{s}")}
                     for s in sizes.split()]},
          open("docs/results/retention.json", "w"), indent=1)
PY
/usr/bin/python3 scripts/render_retention_benchmarks.py
echo "bench-retention: docs/results/retention.json and docs/benchmarks.md updated"
