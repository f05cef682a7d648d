#!/usr/bin/env python3
"""Renders the "What the KV admission gate may know" section of docs/benchmarks.md from
docs/results/gate-reserve.json, which scripts/bench-gate-reserve.sh writes: replays whose client
asks for its recorded output (the published harness) or for max_tokens 32000, with the gate
reserving max_tokens or, as the oracle, the recorded output. Nothing is typed in.

usage: render_gate_reserve.py   (rewrites docs/benchmarks.md between its markers)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import spread, write_section  # noqa: E402

BEGIN, END = "<!-- gate-reserve:begin -->", "<!-- gate-reserve:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "gate-reserve.json")
ARMS = (("harness", "asks for its recorded output (the published harness); gate reserves it"),
        ("max_tokens", "asks for max_tokens 32,000; gate reserves max_tokens"),
        ("oracle", "asks for max_tokens 32,000; gate reserves the recorded output (oracle)"))


def median(values):
    v = sorted(values)
    return v[len(v) // 2]


def row(n, label, runs):
    m = lambda f: median([f(r) for r in runs])  # noqa: E731
    return (f"| {n} | {label} | {m(lambda r: r['throughput_tok_s_per_gpu']) / 1e3:.1f}K | "
            f"{m(lambda r: r['ttft_s']['p50']):.2f} / {m(lambda r: r['ttft_s']['p90']):.2f} / "
            f"{m(lambda r: r['ttft_s']['p99']):.1f} s | "
            f"{m(lambda r: r['gate_wait_s']['p90']):.2f} / {m(lambda r: r['gate_wait_s']['p99']):.1f} s | "
            f"{100 * m(lambda r: r['mean_decode_kv_utilisation']):.0f}% | {100 * m(lambda r: r['reuse']):.1f}% | "
            f"{sum(r['failed_requests'] for r in runs)} / {sum(r['verification_errors'] for r in runs)} |")


def worth(load):
    """The oracle against max_tokens, seed by seed: throughput (relative) and TTFT p90."""
    pairs = list(zip(load["oracle"], load["max_tokens"]))
    tput = [o["throughput_tok_s_per_gpu"] / m["throughput_tok_s_per_gpu"] - 1 for o, m in pairs]
    p90 = [o["ttft_s"]["p90"] - m["ttft_s"]["p90"] for o, m in pairs]
    return f"{load['sessions']} sessions: throughput {spread(tput, 100, '%')}, TTFT p90 {spread(p90, 1, ' s', 2)}"


def render(r):
    rows = ["| sessions | client and gate | tok/s per GPU | TTFT p50 / p90 / p99 | gate wait p90 / p99 | "
            "decode KV reserved (mean) | reuse | failed / verification errors (all seeds) |",
            "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for load in r["loads"]:
        rows += [row(load["sessions"], label, load[arm]) for arm, label in ARMS]
    seeds = r["settings"]["seeds"]
    return "\n".join([
        BEGIN, "## What the KV admission gate may know (issue 44)", "",
        f"Run with `{r['command']}` on {r['date']} ({r['machine']}); raw results `docs/results/gate-reserve.json`. "
        f"Runs of `{r['settings']['replay']} --seed S --sessions N` for S in {', '.join(map(str, seeds))}, medians "
        "over the seeds; times *emulated* by the cost model. The KV admission gate reserves a request's prompt "
        "and output tokens on its decode instance before prefill starts. A real gate knows the prompt and the "
        "request's `max_tokens`, not how many tokens it will generate. The published AgentX harness asks each "
        "request for exactly its recorded output and forces that length, so its gate's reservation is exact by "
        "construction (the first arm, `--max-output 0`, the replay's default); a client that asks for "
        "`max_tokens` 32,000, as the production replay does, generates its recorded output and stops, and the "
        "gate reserves 32,000 (`--max-output 32000`, the default `--gate-reserve max-tokens`) or, knowing the "
        "future, the recorded output (`--gate-reserve oracle`, for comparison only).", "",
        *rows, "",
        "What the oracle gate is worth against the max_tokens gate, the median and range of the per-seed "
        "differences: " + "; ".join(worth(load) for load in r["loads"]) + ".",
        END])


def main():
    with open(RESULTS) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
