#!/usr/bin/env python3
"""Renders the four-server section of docs/benchmarks.md from the raw results that
scripts/bench-four-server.sh commits in docs/results/four-server.json (and, when present,
docs/results/fidelity.json), and copies the plots of PLOTS_DIR to docs/img/four-server-*.png.

usage: render_four_server_benchmarks.py PLOTS_DIR COMMAND
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import copy_plots, machine, write_section  # noqa: E402
from render_replay_benchmarks import pct  # noqa: E402

BEGIN, END = "<!-- four-server:begin -->", "<!-- four-server:end -->"
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")


def yes(ok):
    return "**yes**" if ok else "**no**"


def arm_table(runs):
    out = ["| sessions | pool | system tok/s | per GPU | TTFT p50 / p90 | GPU cache | pool | computed | reuse / ceiling "
           "| between servers | router moves | errors |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r["sessions"], r["pool_scope"] != "shared")):
        t, rails = r["token_sources"], r["deployment"]["rails_emulated"]
        out.append(f'| {r["sessions"]} | {r["pool_scope"]} | {r["throughput_tok_s"] / 1000:,.0f}K '
                   f'| {r["throughput_tok_s_per_gpu"]:,.0f} | {r["ttft_s"]["p50"]:.2f} / {r["ttft_s"]["p90"]:.2f} s '
                   f'| {pct(t["gpu_cache_share"])} | {pct(t["pool_share"])} | {pct(t["computed_share"])} '
                   f'| {pct(t["reuse"])} / {pct(t["ceiling"])} | {rails["bytes"] / 1e12:.1f} TB, {rails["queued_s"]:.0f} s queued '
                   f'| {r["deployment"]["router_moves"]} | {r["verification_errors"]} verification, '
                   f'{r["failed_requests"]} failed |')
    return out


def acceptance(runs):
    by = {(r["sessions"], r["pool_scope"]): r for r in runs}
    loads = sorted({r["sessions"] for r in runs})
    shared = [by[(n, "shared")] for n in loads if (n, "shared") in by]
    split = [by[(n, "split")] for n in loads if (n, "split") in by]
    out = ["Acceptance (the published shape), read from the table above:", ""]
    out.append(f'- Shared pool: reuse ≥ 94% at every load: {yes(all(r["token_sources"]["reuse"] >= 0.94 for r in shared))} '
               f'({", ".join(pct(r["token_sources"]["reuse"]) for r in shared)}).')
    out.append(f'- Split pools: the pool serves ≤ 20%: {yes(all(r["token_sources"]["pool_share"] <= 0.20 for r in split))} '
               f'({", ".join(pct(r["token_sources"]["pool_share"]) for r in split)}); reuse ≤ 80%: '
               f'{yes(all(r["token_sources"]["reuse"] <= 0.80 for r in split))} '
               f'({", ".join(pct(r["token_sources"]["reuse"]) for r in split)}).')
    ratios = [(n, by[(n, "shared")]["throughput_tok_s"] / by[(n, "split")]["throughput_tok_s"])
              for n in loads if (n, "shared") in by and (n, "split") in by]
    high = [x for n, x in ratios if n >= 96]
    out.append(f'- Shared throughput ≥ 1.5× split at 96 and 112 sessions: {yes(bool(high) and min(high) >= 1.5)} '
               f'({", ".join(f"{n}: {x:.2f}×" for n, x in ratios)}).')
    if (112, "shared") in by and (112, "split") in by:
        a, b = by[(112, "shared")]["ttft_s"]["p90"], by[(112, "split")]["ttft_s"]["p90"]
        out.append(f"- Split TTFT p90 ≥ 3× shared at 112 sessions: {yes(b >= 3 * a)} ({b:.2f} s vs {a:.2f} s, {b / a:.1f}×).")
    clean = all(r["verification_errors"] == 0 and r["failed_requests"] == 0 for r in runs)
    out.append(f"- 0 verification errors and 0 failed requests in every run: {yes(clean)}.")
    return out


def fidelity(doc, four_server_runs):
    out = ["### Fidelity: is the single-server no-pool collapse real?", "",
           f"`{doc['command']}` (one 8-GPU server, GPU prefix cache only, 600 emulated s measured). *Together*: "
           "every lane primes its session at once, as the published warm-up does; *spread*: lane i starts at "
           f"i × {doc['arms'][1]['ramp_s']:.0f} s / lanes, so the same sessions arrive as a ramp. Everything else, "
           "seed included, is the same. All figures *emulated* (token sources and times come from the cost "
           "model's clock).", "",
           "| sessions | lane starts | tok/s per GPU | TTFT p50 / p90 | KV gate wait p50 | prefill p50 | GPU cache "
           "| computed | reuse / ceiling |",
           "|---|---|---|---|---|---|---|---|---|"]
    for a in doc["arms"]:
        label = "together" if a["ramp_s"] == 0 else f'spread over {a["ramp_s"]:.0f} s'
        for r in a["runs"]:
            t = r["token_sources"]
            out.append(f'| {r["sessions"]} | {label} | {r["throughput_tok_s_per_gpu"]:,.0f} '
                       f'| {r["ttft_s"]["p50"]:.2f} / {r["ttft_s"]["p90"]:.2f} s | {r["gate_wait_s"]["p50"]:.0f} s '
                       f'| {r["prefill_s"]["p50"]:.0f} s | {pct(t["gpu_cache_share"])} '
                       f'| {pct(t["computed_share"])} | {pct(t["reuse"])} / {pct(t["ceiling"])} |')
    together = {r["sessions"]: r for r in doc["arms"][0]["runs"]}
    spread = {r["sessions"]: r for r in doc["arms"][1]["runs"]}
    same = all(abs(together[n]["token_sources"]["reuse"] - spread[n]["token_sources"]["reuse"]) < 0.05 for n in together)
    live = ", ".join(f'{n} sessions × {r["prompt_tokens"] / max(1, r["requests"]) / 1e3:.0f}K = '
                     f'{n * r["prompt_tokens"] / max(1, r["requests"]) / 1e6:.1f}M' for n, r in sorted(together.items()))
    largest = together[max(together)]["prompt_tokens"] / max(1, together[max(together)]["requests"])
    out += ["", "What the runs show:", ""]
    out.append("- The collapse does not come from the warm-up burst: with the starts spread out the same loads end "
               + ("in the same state " if same else "differently ")
               + "(" + ", ".join(f'{n}: {pct(together[n]["token_sources"]["reuse"])} vs {pct(spread[n]["token_sources"]["reuse"])} reuse'
                                 for n in sorted(together)) + ").")
    out.append("- It is the dynamics of a saturated prefill with an LRU cache, which vLLM's prefix cache shares (LRU "
               "over blocks, a request's tail freed first, FIFO scheduling). Without a pool, each turn that misses the "
               "cache recomputes its whole history (a 140K-token prompt is ~3 s of one PP4 instance). Once that "
               "demand passes what prefill can compute, the closed loop holds every session in the queue: the KV "
               "gate wait and the prefill wait in the table are minutes long. Sessions then come back in queue order, "
               f"round robin. The live histories ({live} tokens, mean prompt per request) exceed the 9.0M-token "
               "GPU cache. Under round robin, LRU evicts each history just before it is reused (the textbook cyclic "
               "case), so reuse is 0 and the queue never drains.")
    out.append("- The published estimate (prefill computing about half of the prompt tokens at 112 sessions) is the "
               f"cache's share of the working set ({9e6 / (112 * largest):.0%} at 112 sessions of the histories above), which is what an order-independent policy would "
               "keep. LRU under round robin does not keep it. So we keep the emulation as it is. A fix in the engine "
               "would be a different eviction policy, not a change of emulation.")
    out.append("- The shared-vs-split comparison above does not rest on the collapse: neither arm saturates prefill "
               "(the split arm computes at most "
               f"{pct(max(r['token_sources']['computed_share'] for r in four_server_runs if r['pool_scope'] == 'split'))} "
               "of its prompt tokens), and both keep most of their reuse.")
    return out


def render(plots, command):
    with open(os.path.join(DOCS, "results", "four-server.json")) as f:
        runs = json.load(f)["runs"]
    out = [BEGIN, "## Four servers, shared pool vs split pools (issue: the four-server experiment)", ""]
    wall = sum(r["wall_s"] for r in runs)
    out += [f"Run {datetime.date.today()} on {machine()} with `{command}` (`scripts/bench-four-server.sh`; raw "
               f"results in `docs/results/four-server.json`; {wall / 60:.0f} min of wall time for all runs). "
               "The emulated cluster (`src/engine/topology.h`, `4x8-6p2d`): 4 servers × 8 GPUs, 6 prefill "
               "(PP4, max batched tokens 8,192) + 2 decode (TP4 + DCP4) instances in two groups, no prefill on "
               "its own group's decode server; a router per group places every request by power of two choices; "
               "one KV admission gate per decode instance (9M tokens), admission wait 900 s; 3 warm-up requests per "
               "lane; output pinned to the recorded length. *shared*: one pool of 4 parts (by rail) over every "
               "server's memory (4 × 16.9M tokens, the published 768 GiB per server); *split*: each server its own "
               "4-part pool of 16.9M tokens, used only by its own prefill instances. Between servers, every "
               "handoff and every read or write of another server's pool memory queues on the emulated NICs "
            "(400 Gb/s each, `src/engine/rail_network.h`).", "",
               "Throughput, TTFT, token sources and rail traffic are *emulated* (the cost model's clock, published "
               "bytes per token); the KV itself is *measured*: every restore goes through real pools (embedded "
               "masters and storage services, one per part), every handoff through the handoff path, and every "
               "restored or handed-off byte is verified.", ""]
    out += arm_table(runs) + [""] + acceptance(runs) + [""]
    split = [r for r in runs if r["pool_scope"] == "split"]
    if split:
        top = max(split, key=lambda r: r["sessions"])
        per_instance = top["token_sources"]["computed"] / top["window_s"] / 6
        out += [f"Where the emulation misses the published shape: the split arm loses reuse as published "
                f"(reuse falls to {pct(top['token_sources']['reuse'])}, TTFT p90 rises), but its throughput "
                "does not level off. At "
                f"{top['sessions']} sessions each prefill instance computes {per_instance / 1e3:.1f}K tok/s. "
                "The cost model's PP4 instance, calibrated on the single server and treated as a pipeline that "
                "chunked prefill keeps full, can compute about 34K tok/s at a 140K context, so prefill never "
                "saturates and the extra computing costs latency but not throughput. The published split arm "
                "levels off at 156K–194K tok/s while computing 21–35% of its prompt tokens, which is about "
                "10K tok/s per instance. Its prefill saturates there, 3× sooner than ours does. The likely "
                "cause is pipeline bubbles: a PP4 instance runs one request's chunks through its four stages "
                "one after another, so with only a few long requests queued it computes at a fraction of its "
                "full rate. The cost model does not model that yet; see the issue's closing note.", ""]
    out.append("Published (design.md, 4 × 8 MI350X): AgentX shared 256K tok/s at 56 sessions → 389K at 96 → 348K "
               "at 112, TTFT p90 ≤ 2.3 s, reuse 94–96%, GPU cache 70% → 54%, pool 26% → 40–41%; split levels off "
               "at 156K–194K tok/s, pool 12–15%, reuse 79% → 65%, TTFT p90 3.9 s → 19.3 s.")
    out += ["", "![system throughput](img/four-server-throughput.png) "
            "![prompt-token sources](img/four-server-token_sources.png) ![TTFT](img/four-server-ttft.png)", ""]
    fid = os.path.join(DOCS, "results", "fidelity.json")
    if os.path.exists(fid):
        with open(fid) as f:
            out += fidelity(json.load(f), runs) + [""]
    out.append(END)
    copy_plots(plots, "four-server")
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write_section(render(sys.argv[1], sys.argv[2]), BEGIN, END)


if __name__ == "__main__":
    main()
