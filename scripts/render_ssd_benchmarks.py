#!/usr/bin/env python3
"""Renders the "SSD tier" section of docs/benchmarks.md from docs/results/ssd-io.json, which
scripts/bench-ssd.sh writes: kvpool's tier file I/O beside fio, same file, block size, queue
depth and O_DIRECT, in one run. Every figure is measured; nothing is typed in.

usage: render_ssd_benchmarks.py   (rewrites docs/benchmarks.md between its ssd markers)
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- ssd:begin -->", "<!-- ssd:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "ssd-io.json")


def render(r):
    s = r["settings"]
    out = [BEGIN, "## SSD tier: file I/O against fio (issue 17)", "",
           f"Measured with `{r['command']}` on {r['date']} ({r['machine']}; the file on {r['filesystem']}; "
           f"{r['fio']}); raw results `docs/results/ssd-io.json`. Random writes, then random reads, of distinct "
           f"block-aligned slots of a {s['file_size']} file, {s['pass_bytes']} a pass, {s['queue_depth']} requests in "
           "flight, O_DIRECT: kvpool's tier file (`ssd/tier_file.h`, io_uring through liburing) and fio "
           "(`ioengine=io_uring`) take turns on the same file within each repetition. Medians of "
           f"{s['reps']} passes; every figure *measured*. Target: kvpool ≥ 0.8 of fio.", "",
           "| block | op | kvpool GB/s | fio GB/s | kvpool / fio |", "|---:|---|---:|---:|---:|"]
    rows = {}
    for p in r["passes"]:
        rows.setdefault((int(p["block_bytes"]), p["op"]), {}).setdefault(p["tool"], []).append(p["gbps"])
    for (block, op), tools in sorted(rows.items(), key=lambda kv: (kv[0][1] != "write", kv[0][0])):
        ours, fio = statistics.median(tools["kvpool"]), statistics.median(tools["fio"])
        out.append(f"| {block >> 20} MiB | {op} | {ours:.2f} | {fio:.2f} | {ours / fio:.2f} |")
    out += ["", "This machine's disk is a shared virtual disk whose speed moves from pass to pass: the ratio, "
            "not the GB/s, is the result. The tier's objects, demotion and reads through the pool are built on "
            "this file in the next steps of issue 17.", END]
    return "\n".join(out)


def main():
    with open(RESULTS) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
