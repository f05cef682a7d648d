#!/usr/bin/env python3
"""Renders the "Session-aware retention and restore prefetch" section of docs/benchmarks.md from
docs/results/session-aware.json, which scripts/bench-session-aware.sh writes: replays with the
plain pool, with the router's retention hints and with restore prefetch, at each load and pool
size, in one run. Nothing is typed in.

usage: render_session_aware_benchmarks.py   (rewrites docs/benchmarks.md between its markers)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- session-aware:begin -->", "<!-- session-aware:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "session-aware.json")
ARMS = (("lru", "plain pool (LRU)"), ("session", "retention hints, bound 0.5"),
        ("session90", "retention hints, bound 0.9"), ("prefetch", "restore prefetch"))


def reported_run(count):
    """What an arm's "median" field holds, in words. bench-session-aware.sh sorts an arm's runs by
    reuse and keeps run count // 2 (counted from 0): the median when the count is odd, else the
    better of the two middle runs, which with two runs is simply the better run."""
    if count == 1:
        return "the one run"
    if count % 2:
        return f"the median run of {count}"
    if count == 2:
        return "the better of two runs"
    return f"the better of the two middle runs of {count} (not a median)"


def reuse(arm):
    return arm["median"]["token_sources"]["reuse"]


def all_runs(arm):
    """Every run's reuse: each run itself where there are two, else their range."""
    runs = sorted(arm["reuse_runs"])
    if len(runs) <= 2:
        return ", ".join(f"{100 * x:.1f}%" for x in runs)
    return f"{100 * runs[0]:.1f}–{100 * runs[-1]:.1f}%"


def row(n, size, name, arm):
    a = arm["median"]
    t, c = a["token_sources"], a["restore_critical_s"]
    spread = all_runs(arm)
    return (f"| {n} | {size / 1e6:.0f}M | {name} | {100 * t['reuse']:.1f}% | {spread} | "
            f"{100 * t['pool_share']:.1f}% | {a['ttft_s']['p50']:.2f} / {a['ttft_s']['p90']:.2f} s | "
            f"{a['restore_critical_total_s']:.1f} s ({1000 * c['p50']:.0f} ms p50) | "
            f"{a['throughput_tok_s_per_gpu'] / 1e3:.1f}K | {a['verification_errors']} / {a['failed_requests']} |")


def render(r):
    counts = {len(s[name]["reuse_runs"]) for load in r["loads"] for s in load["sizes"] for name, _ in ARMS}
    if len(counts) != 1:
        raise SystemExit(f"session-aware.json: arms with different numbers of runs ({sorted(counts)}): "
                         "say per row which run is reported before rendering it")
    count = counts.pop()
    kept = reported_run(count)
    short = {1: "the one run", 2: "better of 2 runs"}.get(count, f"median of {count} runs" if count % 2 else
                                                           f"upper middle of {count} runs")
    rows = [f"| sessions | pool (tokens) | arm | reuse ({short}) | reuse, {'both runs' if count == 2 else 'all runs'} | "
            "pool share | TTFT p50 / p90 | "
            "restore on the critical path, in all | tok/s per GPU | verification errors / failed |",
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for load in r["loads"]:
        n = load["sessions"]
        for s in load["sizes"]:
            size = s["pool_tokens"]
            rows += [row(n, size, label, s[name]) for name, label in ARMS]
            lru, wide, prefetch = s["lru"]["median"], s["session90"]["median"], s["prefetch"]["median"]
            before = lru["restore_critical_total_s"]
            cut = 100 * (1 - prefetch["restore_critical_total_s"] / before) if before > 0 else 0.0
            worst = 100 * (min(s["session90"]["reuse_runs"]) - max(s["lru"]["reuse_runs"]))
            verdicts.append(f"{n} sessions, {size / 1e6:.0f}M tokens: retention hints "
                            f"**{100 * (reuse(s['session90']) - reuse(s['lru'])):+.1f} points** of reuse with the "
                            f"bound at 0.9 ({worst:+.1f} from its worst run to LRU's best; TTFT p50 "
                            f"{wide['ttft_s']['p50'] - lru['ttft_s']['p50']:+.2f} s), "
                            f"{100 * (reuse(s['session']) - reuse(s['lru'])):+.1f} at the default 0.5; prefetch "
                            f"**{cut:.0f}% less** restore on the critical path (TTFT p50 "
                            f"{prefetch['ttft_s']['p50'] - lru['ttft_s']['p50']:+.2f} s, reuse "
                            f"{100 * (reuse(s['prefetch']) - reuse(s['lru'])):+.1f} points)")
    return "\n".join([
        BEGIN, "## Session-aware retention and restore prefetch (issue 18)", "",
        f"Run with `{r['command']}` on {r['date']} ({r['machine']}); raw results `docs/results/session-aware.json`. "
        f"Runs of `{r['settings']['replay']}` at each load and pool size (the smaller about half the working set, "
        f"the larger the default), {r['settings']['repetitions']} of each arm, the same corpus, seed and window. "
        "*Retention hints* (`--retention session`): after each turn the replay's router retains the session's "
        "history in the pool (`Client::Retain`, every stage object of its prompt's chunks) for twice its "
        "recorded wait, expected back when the wait ends, and again when the next turn arrives (for twice the "
        "idle cap, so that it lasts while the turn queues), expected at once, all at the run's pace, and "
        "releases it when the session ends; a subagent's history likewise while it runs. The master keeps "
        "retained units over others and evicts the retained unit expected back last first; at most a share of "
        "its units are retained at once (`--max-retained-fraction`: 0.5 by default, which leaves half the pool "
        "plain LRU for clients that send no hints; 0.9 where the router fronts every client, as here), and a "
        "retention expected sooner takes the place of the one expected last. "
        "*Restore prefetch* (`--prefetch on`): the router picks a request's prefill instance when it arrives, "
        "which restores its pool prefix at once into GPU cache blocks it holds (at most 5% of the cache) while "
        "the request waits at the admission gate and in the prefill queue. *Restore on the critical path*: from "
        "a request's start in prefill to its last stage restored, summed over the window's requests. Times are "
        "*emulated* by the cost model; the bytes are the real pool's, every one verified. Leases, hints and "
        f"eviction passes run in real time, so runs of an arm differ: each row is {kept} by reuse (every figure "
        f"of the row from that run), beside the reuse of {'both runs' if count == 2 else 'all its runs'}. "
        "Read leases are 500 ms (`--read-lease-ms`: src/replay/README.md).", "",
        *rows, "",
        "Targets (issue 18), at 112 sessions: retention hints ≥ +5 points of reuse at the half-size pool, "
        f"prefetch ≥ 50% less restore on the critical path, no regression at the default size. Measured, "
        f"{kept} of each arm against {kept} of LRU: " + "; ".join(verdicts) + ".", "",
        "Where the plain pool's TTFT p50 runs to a minute or more, prefill is far behind (its planned load is "
        "over 100%: the \"Capacity planner\" section): requests queue for minutes, the GPU prefix cache keeps almost "
        "nothing a session comes back to, and the pool serves most of the reuse. LRU then evicts exactly the "
        "wrong histories: a queued turn's history is the least recently used of all and the next to be needed. "
        "Ranked by expected reuse, the pool keeps the queue and gives up the sessions that have just been served "
        "and are furthest from their next turn; less is recomputed, prefill falls less behind, and TTFT drops "
        "with it. With the bound at 0.5 only half the units are ranked that way and the other half stays LRU: "
        "the default bound gets about half of the gain. At the default size nothing is evicted, so the hints change "
        "nothing there. A prefetch, far behind, restores a request's prefix minutes before it runs, into GPU "
        "cache blocks the prefix cache and running requests then lack, and is often given back and done again: "
        "the restore wait goes, but prefill falls further behind. `--prefetch` stays off by default and "
        "`--retention` stays `lru` (a router opts in).",
        END])


def main():
    with open(RESULTS) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
