#!/usr/bin/env python3
"""Collects restore_bench --json results (any number of rounds, GPU and CPU, 4 and 8 workers)
into docs/results/checksum-cost.json, which scripts/render_reliability.py renders (rows pool the
repetitions of every round of one device and worker count). The previous file's costs are kept
as "previous" for the comparison column when --previous-how says what that run did.

usage: collect_checksum_cost.py --machine TEXT [--previous-how TEXT] [--commit C] restore-*.json
  --commit  the commit restore_bench was built from (default: .gpu-bundle/commit.txt, which
            scripts/gpu-bundle.sh writes, else this checkout's: scripts/bench_machine.py)
"""
import argparse, datetime, json, os, statistics, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_machine import git_commit  # noqa: E402
PATH = os.path.join(ROOT, "docs", "results", "checksum-cost.json")
COMMAND = ("restore_bench --device gpu|cpu --reps 9 --workers 4|8 --copy-threads 16 --json FILE, each in "
           "turn, {rounds} rounds (bench/restore_bench.cc; built here with scripts/gpu-bundle.sh, run on the device); "
           "scripts/collect_checksum_cost.py")


def costs(runs):
    """Cost in % per (device, workers, path): pooled medians with checks over without."""
    pooled = {}
    for run in runs:
        for m in run["modes"]:
            pooled.setdefault((run["device"], run["workers"], m["path"], m["checksums"]), []).extend(m["restore_ms_runs"])
    return [{"device": d, "workers": w, "path": p,
             "cost_pct": round(100 * (statistics.median(ms) / statistics.median(pooled[(d, w, p, False)]) - 1), 1)}
            for (d, w, p, on), ms in sorted(pooled.items()) if on]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", required=True)
    ap.add_argument("--previous-how")
    ap.add_argument("--commit")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    runs = [json.load(open(f)) for f in args.files]
    rounds = max(1, len(runs) // len({(r["device"], r["workers"]) for r in runs}))
    bundle = os.path.join(ROOT, ".gpu-bundle", "commit.txt")
    commit = args.commit or (open(bundle).read().strip() if os.path.exists(bundle) else git_commit())
    out = {"command": COMMAND.format(rounds=rounds), "date": datetime.date.today().isoformat(),
           "machine": args.machine, "commit": commit, "rounds": rounds, "runs": runs}
    if args.previous_how and os.path.exists(PATH):
        old = json.load(open(PATH))
        out["previous"] = {"date": old["date"], "how": args.previous_how, "costs": costs(old["runs"])}
    json.dump(out, open(PATH, "w"), indent=1)


if __name__ == "__main__":
    main()
