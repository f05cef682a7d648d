#!/usr/bin/env bash
# The documented long fuzzing run (issue 16): every target of fuzz/ up to RUNS inputs
# (default 10M), each bounded by MAX_SECONDS (default 3600), through scripts/fuzz.sh.
# Raw results: docs/results/fuzz-long.json (a run of some targets replaces only their rows);
# rendered into docs/reliability.md.
#
# A run of many workers per target on another machine (scripts/fuzz-bundle.sh, then
# scripts/fuzz-parallel.sh there) is recorded from what that run wrote to its OUT:
#   FROM_PARALLEL=dir scripts/bench-fuzz-long.sh [TARGET...]   (only those targets' rows, if named)
# Its rows say the machine it ran on, its workers and each call (a later call continues the corpus).
#
# usage: [RUNS=N] [MAX_SECONDS=S] scripts/bench-fuzz-long.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
export RUNS=${RUNS:-10000000}
status=0
if [ -n "${FROM_PARALLEL:-}" ]; then
  SUMMARY=$FROM_PARALLEL/summary.jsonl
else
  OUT=$(mktemp -d)
  # A failed target's log and input stay for a regression test.
  trap 'if [ "$status" = 0 ]; then rm -rf "$OUT"; else echo "bench-fuzz-long: logs and failing inputs kept in $OUT" >&2; fi' EXIT
  OUT=$OUT ./scripts/fuzz.sh "${MAX_SECONDS:-3600}" "$@" || status=$?
  SUMMARY=$OUT/summary.jsonl
fi
/usr/bin/python3 - "$SUMMARY" "$RUNS" "${MAX_SECONDS:-3600}" "${FROM_PARALLEL:-}" "$@" <<'PY'
# Targets run now replace their rows; rows of targets not run now are kept with their own date,
# so the slow trace-loader targets can run apart from the rest.
import datetime, json, os, subprocess, sys
sys.path.insert(0, "scripts")
from bench_machine import git_commit  # noqa: E402
path = "docs/results/fuzz-long.json"
summary, runs_target, max_seconds, parallel, only = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
today = datetime.date.today().isoformat()
if parallel:  # machine.txt of scripts/fuzz-parallel.sh: nproc, uname, cpu, date (UTC) of that machine,
    # the commit its bundle was built from (scripts/fuzz-bundle.sh)
    info = dict(l.split(": ", 1) for l in open(os.path.join(parallel, "machine.txt")).read().splitlines())
    today, cpu, cores, uname = info["date"], info["cpu"], info["nproc"], info["uname"]
    commit = info.get("commit", "unknown")
else:
    commit = git_commit()  # what scripts/fuzz.sh built just now
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    cores, uname = os.cpu_count(), subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
machine = f"{uname}, {cores} cores ({cpu})"
old = json.load(open(path)) if os.path.exists(path) else {"targets": []}
rows = {t["target"]: {"date": old.get("date"), "machine": old.get("machine"), "max_seconds": old.get("max_seconds"), **t}
        for t in old["targets"]}
for line in open(summary):
    t = json.loads(line)
    if only and t["target"] not in only:
        continue
    t.update(date=today, machine=machine, commit=commit, runs_target=runs_target,
             max_seconds=sum(c["bound"] for c in t["calls"]) if parallel else max_seconds)
    if parallel:
        t["command"] = "scripts/fuzz-parallel.sh"
        # A target resumed on another machine ran on each of its calls' machines.
        machines = list(dict.fromkeys(c.get("machine", machine) for c in t["calls"]))
        t["machine"] = " and ".join(machines)
    rows[t["target"]] = t
json.dump({"command": "scripts/bench-fuzz-long.sh",
           "fuzzer": "libFuzzer (clang-16), ASan + UBSan, leak detection on, 10 s per-input timeout",
           "runs_target": int(sys.argv[2]),
           "targets": sorted(rows.values(), key=lambda t: t["target"])}, open(path, "w"), indent=1)
PY
/usr/bin/python3 scripts/render_reliability.py
exit $status
