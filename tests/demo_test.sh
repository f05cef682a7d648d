#!/usr/bin/env bash
# The README's first command is a test: runs scripts/demo.sh as a user would (same steps, a
# free port, a temporary output folder; KVPOOL_DEMO_DURATION shortens the replay) and fails unless it exits 0,
# the round trip matched, the replay's JSON has both arms with the pool's reuse above the GPU
# cache alone's, and the plots and report.html exist. scripts/test.sh runs it after the
# release suite. usage: tests/demo_test.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fail() { echo "demo_test: FAILED: $*" >&2; echo "--- the demo's output:" >&2; cat "$OUT/demo.log" >&2; exit 1; }

# A user's shell may hold a pool variable from an earlier step; the demo must not depend on it.
status=0
KVPOOL_MASTER=127.0.0.1:1 KVPOOL_BUILD=${1:-build} KVPOOL_PORT=$PORT KVPOOL_DEMO_OUT="$OUT/demo" \
  scripts/demo.sh >"$OUT/demo.log" 2>&1 || status=$?
[ "$status" = 0 ] || fail "scripts/demo.sh exited $status"
grep -q "^round trip OK: bytes identical" "$OUT/demo.log" || fail "no matching round trip"
for f in replay.json throughput.png token_sources.png ttft.png report.html; do
  [ -s "$OUT/demo/$f" ] || fail "$f was not written"
done
/usr/bin/python3 - "$OUT/demo/replay.json" <<'EOF' || fail "the replay's results"
import json, sys
runs = {r["mode"]: r for r in json.load(open(sys.argv[1]))["runs"]}
assert set(runs) == {"pool", "no-pool"}, f"arms {sorted(runs)}, expected pool and no-pool"
for mode, r in runs.items():
    assert r["requests"] > 0 and r["failed_requests"] == 0 and r["verification_errors"] == 0, (mode, r["requests"])
with_pool, alone = (runs[m]["token_sources"]["reuse"] for m in ("pool", "no-pool"))
assert with_pool > alone, f"reuse with the pool {with_pool:.3f} is not above the GPU cache alone's {alone:.3f}"
print(f"demo_test: reuse {with_pool:.3f} with the pool against {alone:.3f} with the GPU cache alone")
EOF
echo "demo_test: passed (the demo's output: $(wc -l <"$OUT/demo.log") lines)"
