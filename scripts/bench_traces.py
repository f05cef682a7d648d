#!/usr/bin/env python3
"""Real AgentX traces: load cost, the synthetic corpus beside the real sample, a replay of the
sample. Writes the raw results to docs/results/ (small JSON, committed) and renders the traces
section of docs/benchmarks.md from them (scripts/render_trace_benchmarks.py).

usage: scripts/bench_traces.py [--build build] [--work bench-results/traces] [--sample DIR]
                               [--corpus-mb 450] [--repeats 3] [--sessions 32,112] [--duration 900]

Steps, one run on one machine:
  1. load: `kvpool trace stats` on the sample folder and on a ~450 MB JSONL corpus made by
     repeating the sample (plain and gzip), wall time and peak RSS, median of --repeats; in
     the same run the floors and a tree-holding reference: cat/zcat of the same bytes, and
     Python's json module parsing every line (keeping nothing, then keeping every tree).
  2. compare: `kvpool trace stats --json --quantiles 100` of the sample and of the default
     synthetic corpus (`kvpool trace synth`, 393 traces, seed 1).
  3. replay: `kvpool replay --trace SAMPLE` at --sessions for --duration emulated seconds,
     with and without the pool.
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
RESULTS = os.path.join(ROOT, "docs", "results")


def run_measured(argv):
    """Runs argv to completion under GNU time; returns (wall seconds, peak RSS in MiB) of that
    process alone (time forks from a small process, so nothing of this Python is counted)."""
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "--"] + argv, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_traces: {' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    wall, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) / 1024.0


def median_of(argv, repeats):
    runs = [run_measured(argv) for _ in range(repeats)]
    return {"wall_s": statistics.median(r[0] for r in runs), "peak_rss_mib": statistics.median(r[1] for r in runs),
            "runs": len(runs)}


def sample_lines(sample):
    lines = []
    for name in sorted(os.listdir(sample)):
        if name.endswith(".json"):
            with open(os.path.join(sample, name)) as f:
                lines.append(json.loads(f.read()))
    return lines


def make_corpus(sample, work, megabytes):
    """The sample repeated to `megabytes` of JSONL; copy k of trace X gets id X-kNNN."""
    traces = sample_lines(sample)
    path = os.path.join(work, f"repeated-{megabytes}mb.jsonl")
    written, count = 0, 0
    with open(path, "w") as out:
        copy = 0
        while written < megabytes * 1_000_000:
            for t in traces:
                line = json.dumps(dict(t, id=f"{t['id']}-k{copy:04d}"), separators=(",", ":")) + "\n"
                out.write(line)
                written += len(line)
                count += 1
            copy += 1
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=6) as dst:
        while chunk := src.read(1 << 24):
            dst.write(chunk)
    return path, count


PY_PARSE = """
import gzip, json, sys
keep = sys.argv[2] == "keep"
trees = []
with open(sys.argv[1]) as f:
    for line in f:
        if line.strip():
            tree = json.loads(line)
            if keep:
                trees.append(tree)
print(len(trees))
"""


def bench_load(kvpool, sample, work, megabytes, repeats):
    corpus, traces = make_corpus(sample, work, megabytes)
    size = os.path.getsize(corpus)
    gz_size = os.path.getsize(corpus + ".gz")
    stats = lambda path: [kvpool, "--log-level", "warn", "trace", "stats", path, "--json"]
    rows = [
        {"input": "sample folder (8 files)", "bytes": sum(os.path.getsize(os.path.join(sample, n))
                                                         for n in os.listdir(sample) if n.endswith(".json")),
         "traces": 8, "kvpool": median_of(stats(sample), repeats)},
        {"input": f"repeated sample, JSONL", "bytes": size, "traces": traces,
         "kvpool": median_of(stats(corpus), repeats),
         "cat": median_of(["dd", f"if={corpus}", "of=/dev/null", "bs=1M", "status=none"], repeats),
         "python_parse": median_of([sys.executable, "-c", PY_PARSE, corpus, "drop"], 1),
         "python_keep": median_of([sys.executable, "-c", PY_PARSE, corpus, "keep"], 1)},
        {"input": f"repeated sample, JSONL.gz", "bytes": gz_size, "traces": traces,
         "kvpool": median_of(stats(corpus + ".gz"), repeats),
         "cat": median_of(["sh", "-c", 'exec zcat "$0" > /dev/null', corpus + ".gz"], repeats)},
    ]
    for path in (corpus, corpus + ".gz"):
        os.remove(path)
    return rows


PLOTTED = ("input_tokens", "new_tokens", "gap_s")


def trace_stats(kvpool, path):
    """`trace stats --json` with quantiles kept only for the plotted distributions."""
    out = subprocess.run([kvpool, "--log-level", "warn", "trace", "stats", path, "--json", "--quantiles", "100"],
                         check=True, capture_output=True, text=True).stdout
    stats = json.loads(out)
    for key, value in stats.items():
        if isinstance(value, dict) and key not in PLOTTED:
            value.pop("quantiles", None)
    return stats


def bench_compare(kvpool, sample, work):
    synth = os.path.join(work, "synth-393.jsonl")
    subprocess.run([kvpool, "trace", "synth", "--out", synth, "--traces", "393", "--seed", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    result = {"real": trace_stats(kvpool, sample), "synthetic": trace_stats(kvpool, synth),
              "synthetic_command": "kvpool trace synth --traces 393 --seed 1"}
    os.remove(synth)
    return result


def bench_replay(kvpool, sample, work, sessions, duration):
    out = os.path.join(work, "replay-sample.json")
    args = ["replay", "--trace", os.path.relpath(sample, ROOT), "--sessions", sessions, "--duration", str(duration),
            "--mode", "both"]
    subprocess.run([kvpool, "--log-level", "warn"] + args + ["--json", out], check=True, stdout=subprocess.DEVNULL,
                   cwd=ROOT)
    with open(out) as f:
        runs = json.load(f)["runs"]
    return {"command": " ".join(["kvpool"] + args), "runs": runs}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--work", default=os.path.join(ROOT, "bench-results", "traces"))
    p.add_argument("--sample", default=os.path.join(ROOT, "src", "trace", "testdata", "weka-sample"))
    p.add_argument("--corpus-mb", type=int, default=450)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sessions", default="32,112")
    p.add_argument("--duration", type=int, default=900)
    p.add_argument("--only", help="run only this step, e.g. replay-weka-sample.json (the others' results stay)")
    a = p.parse_args()
    kvpool = os.path.join(a.build, "src", "cli", "kvpool")
    if not os.access(kvpool, os.X_OK):
        sys.exit(f"bench_traces: {kvpool} not built (cmake --build {a.build} --target kvpool)")
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(RESULTS, exist_ok=True)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from bench_machine import describe_run
    run = describe_run()  # the commit measured, the date and the machine
    header = {"date": run["date"], "machine": run["machine"],
              "command": " ".join(["scripts/bench_traces.py"] + sys.argv[1:]), "commit": run["commit"]}
    steps = {
        "trace-load.json": lambda: {"rows": bench_load(kvpool, a.sample, a.work, a.corpus_mb, a.repeats)},
        "trace-compare.json": lambda: bench_compare(kvpool, a.sample, a.work),
        "replay-weka-sample.json": lambda: bench_replay(kvpool, a.sample, a.work, a.sessions, a.duration),
    }
    if a.only and a.only not in steps:
        sys.exit(f"bench_traces: --only: choose one of {', '.join(steps)}")
    for name, step in steps.items():
        if a.only and name != a.only:
            continue
        print(f"bench_traces: {name} ...", flush=True)
        with open(os.path.join(RESULTS, name), "w") as f:
            json.dump(dict(header, **step()), f, indent=1)
            f.write("\n")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "render_trace_benchmarks.py")], check=True)


if __name__ == "__main__":
    main()
