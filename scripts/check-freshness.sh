#!/usr/bin/env bash
# Is every published figure's freshness stamp true? For every section of docs/benchmarks.md and
# docs/reliability.md: the commit and date its raw results (docs/results/) were measured at, and
# whether the code it measures (scripts/freshness-manifest.json) changed since, as one table.
# Exits 1 when a stamp line is missing or out of date.
#
# usage: scripts/check-freshness.sh [--write]   (--write: rewrites every stamp line)
# Cheap: git and the results' JSON, no build. See scripts/freshness.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/freshness.py "$@"
