#!/usr/bin/env bash
# How long CI takes: what `.ci/run` does (scripts/install-deps.sh, then scripts/test.sh) on a
# fresh clone of HEAD in a temporary folder, so every build starts from nothing; each stage's
# time comes from test.sh's own table. Raw results: docs/results/ci-time.json, rendered into
# docs/reliability.md ("CI time"). Run it on a quiet machine: these boxes vary about 2x from
# run to run, so compare stages inside one run. Commit first: the clone is of HEAD.
#
# usage: scripts/bench-ci-time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CLONE=$(mktemp -d)
trap 'rm -rf "$CLONE"' EXIT
git clone -q --no-local . "$CLONE/kvpool"
cd "$CLONE/kvpool"
start=$SECONDS
./scripts/install-deps.sh
deps=$((SECONDS - start))
status=0
TEST_TIMES=$CLONE/test-times.json ./scripts/test.sh || status=$?
cd - >/dev/null
/usr/bin/python3 - "$CLONE/test-times.json" "$deps" "$(git -C "$CLONE/kvpool" rev-parse HEAD)" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from bench_machine import describe_run  # noqa: E402
times, deps, commit = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
# apt here found the packages installed already (a fresh CI machine downloads and unpacks them).
out = {"command": "scripts/bench-ci-time.sh", **describe_run(), "commit": commit,
       "install_deps_seconds": deps, "test_sh": times, "total_seconds": deps + times["seconds"]}
with open("docs/results/ci-time.json", "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"CI time: install-deps {deps} s + test.sh {times['seconds']} s = {out['total_seconds']} s "
      f"({out['total_seconds'] / 60:.1f} min); test.sh {'passed' if times['passed'] else 'FAILED'}")
PY
exit $status
