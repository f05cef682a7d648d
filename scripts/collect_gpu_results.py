#!/usr/bin/env python3
"""Gathers what one scripts/gpu-check.sh run left in its OUT folder into one small JSON file
(docs/results/gpu-check.json), the raw results that render_gpu_benchmarks.py draws the GPU
section of docs/benchmarks.md from. Nothing is typed in: every figure is a bench's own JSON, a
gtest report or the check's summary table.

usage: collect_gpu_results.py OUT_DIR DATE COMMAND > docs/results/gpu-check.json
  OUT_DIR  the run's folder (gpu.txt, host.txt, commit.txt, *_test.json, *_bench.json,
           replay-gpu.json and summary.txt, the check's verdict table; or console.log, the run's
           whole output)
The commit measured is OUT_DIR/commit.txt (gpu-check.sh: the bundle's), else .gpu-bundle/commit.txt
here, else "unknown".
"""
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def gtest_counts(report):
    """Tests run, failed and skipped in a gtest JSON report."""
    cases = [t for suite in report.get("testsuites", []) for t in suite.get("testsuite", [])]
    skipped = sum(1 for t in cases if t.get("result") == "SKIPPED")
    return {"tests": report["tests"], "failures": report["failures"] + report.get("errors", 0), "skipped": skipped}


def main():
    out_dir, date, command = sys.argv[1:4]
    path = lambda name: os.path.join(out_dir, name)  # noqa: E731
    r = {"date": date, "command": command, "commit": "unknown"}
    for commit_file in (path("commit.txt"), os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                          ".gpu-bundle", "commit.txt")):
        if os.path.exists(commit_file):
            r["commit"] = open(commit_file).read().strip() or "unknown"
            break
    with open(path("gpu.txt")) as f:
        r["gpu"] = [line.strip() for line in f if line.strip()]
    if os.path.exists(path("host.txt")):
        with open(path("host.txt")) as f:
            r["host"] = [line.strip() for line in f if line.strip()]
    r["tests"] = {}
    for name in sorted(os.listdir(out_dir)):
        if name.endswith("_test.json"):
            r["tests"][name[:-len(".json")]] = gtest_counts(load(path(name)))
    log = path("test_transformer_restore.log")
    if os.path.exists(log):
        text = open(log).read()
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped)", text)}
        r["transformer_restore"] = counts
    for bench in ("connector_bench", "restore_bench", "handoff_bench", "kvpool_handoff_network_bench"):
        if os.path.exists(path(bench + ".json")):
            r[bench] = load(path(bench + ".json"))
    if os.path.exists(path("index_select_bench.jsonl")):
        r["torch_index_select"] = [json.loads(line) for line in open(path("index_select_bench.jsonl")) if line.strip()]
    if os.path.exists(path("replay-gpu.json")):
        r["replay_gpu"] = load(path("replay-gpu.json"))["runs"]
    # The check's own verdict table: the lines that name a check and its outcome.
    table = next((path(n) for n in ("summary.txt", "console.log") if os.path.exists(path(n))), None)
    console = open(table).read() if table else ""
    verdicts = re.findall(r"^(\S.{45,}?) (PASS\b.*|FAIL\b.*|SKIPPED\b.*|ok)$", console, re.M)
    r["verdicts"] = [{"check": c.strip(), "result": v.strip()} for c, v in verdicts]
    exit_line = re.search(r"^results in .*; exit (\d+)$", console, re.M)
    r["exit_status"] = int(exit_line.group(1)) if exit_line else None
    json.dump(r, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
