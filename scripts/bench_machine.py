#!/usr/bin/python3
"""What a benchmark's raw results say of the run that made them, the same way in every script:
the machine ("<uname -srm>, <N> cores (<CPU model>)"), the commit of the code measured and the
date. scripts/check-freshness.sh reads the commit back to tell whether what a figure measures
changed since (docs/benchmarks.md, top).

usage (from a benchmark's Python, run in the repository root):
    sys.path.insert(0, "scripts"); from bench_machine import describe_run
    json.dump({"command": "scripts/bench-x.sh", **describe_run(), ...}, f, indent=1)
from a shell script:
    /usr/bin/python3 scripts/bench_machine.py                  # {"commit": ..., "date": ..., "machine": ...}
    /usr/bin/python3 scripts/bench_machine.py commit           # the commit alone
    /usr/bin/python3 scripts/bench_machine.py stamp FILE.json [--command CMD]
        # records the commit in a results file just written (and the command, date and machine
        # where it has none: kvpool replay --json's), in its own indent

commit: `git rev-parse HEAD`, with "+dirty" when the code (DIRTY_PATHS) has changes not
committed, so the results were measured on more than that commit; "unknown" outside a git
checkout (a device machine given a bundle: the bundle's commit.txt says it there).
"""
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# Where a change makes the code measured differ from the commit.
DIRTY_PATHS = ("src", "bench", "scripts", "fuzz", "python", "CMakeLists.txt")


def describe_machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    uname = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    return f"{uname}, {os.cpu_count()} cores ({cpu})"


def git_commit():
    """HEAD, "+dirty" when DIRTY_PATHS have uncommitted or untracked changes; "unknown" without git."""
    def git(*args):
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                              env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"))  # leave the index lock alone
    head = git("rev-parse", "--verify", "HEAD")
    if head.returncode != 0:
        return "unknown"
    status = git("status", "--porcelain", "--untracked-files=normal", "--", *DIRTY_PATHS)
    return head.stdout.strip() + ("+dirty" if status.returncode != 0 or status.stdout.strip() else "")


def describe_run():
    """{"commit", "date", "machine"} of a run made now, here."""
    return {"commit": git_commit(), "date": datetime.date.today().isoformat(), "machine": describe_machine()}


def machine_timings(run):
    """A replay run's timings of the machine that ran it (wall time, the stall behind the pace,
    real restore and handoff times), the only figures two runs of one seed may differ in: under
    "machine_timings" since the pool runs on the replay's clock (issue 41), at the run's top
    level in results from before."""
    return run.get("machine_timings", run)


def json_indent(text):
    """The indent a JSON file was written with (1 for json.dump(indent=1), 2 for kvpool's)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped:
            return len(line) - len(stripped) or None
    return None


META = ("command", "date", "machine")


def with_run(doc, command=None, commit=None):
    """`doc` (a results dict) with the commit of a run made now, and its command, date and machine
    where it has none: after its own command/date/machine keys, else first. A backfill's
    commit_note goes: these results are new."""
    run = {"command": command, "date": datetime.date.today().isoformat(), "machine": describe_machine()}
    new = {k: v for k, v in run.items() if v is not None and k not in doc}
    new["commit"] = commit or git_commit()
    doc = {k: v for k, v in doc.items() if k not in ("commit", "commit_note")}
    keys = list(doc)
    last = max((keys.index(k) for k in META if k in doc), default=-1)
    out = dict(new) if last < 0 else {}
    for i, k in enumerate(keys):
        out[k] = doc[k]
        if i == last:
            out.update(new)
    return out


def stamp(path, command=None):
    """Writes with_run() of the results file at `path` back in place, in its own indent."""
    text = open(path).read()
    doc = with_run(json.loads(text), command)
    with open(path, "w") as f:
        json.dump(doc, f, indent=json_indent(text))
        if text.endswith("\n"):
            f.write("\n")


def main(argv):
    if not argv:
        print(json.dumps(describe_run()))
    elif argv[0] == "commit":
        print(git_commit())
    elif argv[0] == "stamp" and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--command"):
        stamp(argv[1], argv[3] if len(argv) == 4 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
