#!/usr/bin/env python3
"""Renders the four-server section of docs/benchmarks.md from the raw results that
scripts/bench-four-server.sh commits in docs/results/: four-server.json (experiment 1, the
AgentX sweep), production.json (experiment 2, the production-style replay) and, when present,
four-server-half-cache.json, four-server-seeds.json (experiment 1 at more seeds), four-server-cluster.json
and fidelity.json. Every command, date and
machine on the page is the results' own. With PLOTS_DIR (the run's `kvpool report` plots of
experiment 1), copies them to docs/img/four-server-*.png and draws experiment 2's into
docs/img/four-server-production-*.png; without it the page's plots stay as they are.

usage: render_four_server_benchmarks.py [PLOTS_DIR]
       render_four_server_benchmarks.py --collect-seeds COMMAND SEED=RUN.json...
           (writes docs/results/four-server-seeds.json from `kvpool replay --json` runs of experiment 1)
"""
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay_report  # noqa: E402
from bench_machine import machine_timings  # noqa: E402
from render_benchmarks import copy_plots, write_section  # noqa: E402
from render_replay_benchmarks import pct  # noqa: E402

BEGIN, END = "<!-- four-server:begin -->", "<!-- four-server:end -->"
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")


def yes(ok):
    return "**yes**" if ok else "**no**"


def load_label(run):
    rate = run.get("arrival_rate", 0)
    return f"{rate:g} req/s" if rate > 0 else str(run["sessions"])


def arm_table(runs):
    out = ["| load | pool | system tok/s | per GPU | TTFT p50 / p90 | GPU cache | pool | computed | reuse / ceiling "
           "| between servers | router moves | errors |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (replay_report.load(r), r["pool_scope"] != "shared")):
        t, rails = r["token_sources"], r["deployment"]["rails_emulated"]
        out.append(f'| {load_label(r)} | {r["pool_scope"]} | {r["throughput_tok_s"] / 1000:,.0f}K '
                   f'| {r["throughput_tok_s_per_gpu"]:,.0f} | {r["ttft_s"]["p50"]:.2f} / {r["ttft_s"]["p90"]:.2f} s '
                   f'| {pct(t["gpu_cache_share"])} | {pct(t["pool_share"])} | {pct(t["computed_share"])} '
                   f'| {pct(t["reuse"])} / {pct(t["ceiling"])} | {rails["bytes"] / 1e12:.1f} TB, {rails["queued_s"]:.0f} s queued '
                   f'| {r["deployment"]["router_moves"]} | {r["verification_errors"]} verification, '
                   f'{r["failed_requests"]} failed |')
    return out


def by_arm(runs):
    """{(load, scope): run} and the sorted loads."""
    by = {(replay_report.load(r), r["pool_scope"]): r for r in runs}
    return by, sorted({replay_report.load(r) for r in runs})


def shares(runs, key):
    return ", ".join(pct(r["token_sources"][key]) for r in sorted(runs, key=replay_report.load))


def acceptance(agentx, production):
    out = ["Acceptance (the published shape), read from the tables above:", ""]
    for name, runs in (("Experiment 1", agentx), ("Experiment 2", production)):
        shared = [r for r in runs if r["pool_scope"] == "shared"]
        split = [r for r in runs if r["pool_scope"] == "split"]
        if not shared or not split:
            continue
        out.append(f'- {name}, shared pool: reuse ≥ 94% at every load: '
                   f'{yes(all(r["token_sources"]["reuse"] >= 0.94 for r in shared))} ({shares(shared, "reuse")}).')
        if runs is production:
            out.append(f'- {name}, shared pool: the pool serves ≥ 50% of prompt tokens: '
                       f'{yes(all(r["token_sources"]["pool_share"] >= 0.50 for r in shared))} '
                       f'({shares(shared, "pool_share")}; published 58%).')
        out.append(f'- {name}, split pools: the pool serves ≤ 20%: '
                   f'{yes(all(r["token_sources"]["pool_share"] <= 0.20 for r in split))} ({shares(split, "pool_share")}); '
                   f'reuse ≤ 80%: {yes(all(r["token_sources"]["reuse"] <= 0.80 for r in split))} ({shares(split, "reuse")}).')
    by, loads = by_arm(agentx)
    ratios = [(n, by[(n, "shared")]["throughput_tok_s"] / by[(n, "split")]["throughput_tok_s"])
              for n in loads if (n, "shared") in by and (n, "split") in by]
    high = [x for n, x in ratios if n >= 96]
    out.append(f'- Experiment 1: shared throughput ≥ 1.5× split at 96 and 112 sessions: {yes(bool(high) and min(high) >= 1.5)} '
               f'({", ".join(f"{n}: {x:.2f}×" for n, x in ratios)}; published 1.6× at 56, ~2× at 96–112).')
    if (112, "shared") in by and (112, "split") in by:
        a, b = by[(112, "shared")]["ttft_s"]["p90"], by[(112, "split")]["ttft_s"]["p90"]
        out.append(f"- Experiment 1: split TTFT p90 ≥ 3× shared at 112 sessions: {yes(b >= 3 * a)} "
                   f"({b:.2f} s vs {a:.2f} s, {b / a:.1f}×; published 19.3 s vs 2.3 s).")
    every = agentx + production
    clean = all(r["verification_errors"] == 0 and r["failed_requests"] == 0 for r in every)
    out.append(f"- 0 verification errors and 0 failed requests in every run: {yes(clean)}. The same seed gives the "
               "same emulated results: `ReplayEndToEndTest.FourServersSharedAndSplitPools` runs both arms twice "
               "and compares them.")
    return out


def misses(agentx, production, half):
    """Where the emulated shape differs from the published one, with the figures that show why."""
    by, loads = by_arm(agentx)
    top = max(loads)
    shared, split = by[(top, "shared")], by[(top, "split")]
    low = by[(min(loads), "shared")]
    per_instance = split["token_sources"]["computed"] / split["window_s"] / 6
    lines = ["Where the emulation misses the published shape, and why:", "",
            f"- Experiment 1's split arm loses reuse and latency as published (at {top} sessions reuse "
            f"{pct(split['token_sources']['reuse'])}, TTFT p90 {split['ttft_s']['p90']:.1f} s against "
            f"{shared['ttft_s']['p90']:.1f} s), but not half its throughput. Each of its prefill instances computes "
            f"{per_instance / 1e3:.1f}K tok/s. A PP4 instance here computes ~9K tok/s on one long request alone and "
            "up to ~34K with four in flight, so the extra computing queues requests (the TTFT) without capping "
            "the closed loop's rate, whose cycle is mostly the sessions' own tool and think time. The published "
            "split arm levels off at 156K–194K tok/s while computing 21–35% of its prompt tokens, about 10K tok/s "
            "per instance: its prefill is saturated there, ours is not yet.",
            f"- The GPU prefix caches serve more here than published ({pct(low['token_sources']['gpu_cache_share'])} "
            f"at {min(loads)} sessions and {pct(shared['token_sources']['gpu_cache_share'])} at {top} in the shared "
            "arm, against 70% → 54%). With 9.0M tokens each, every prefill instance holds most of its group's live "
            "histories, so a turn routed to another instance of its group still finds most of its prefix in that "
            "instance's own GPU cache, and the split arm loses less than published. The sensitivity runs below "
            "halve that cache."]
    # Closed-loop arithmetic: a lane's cycle (its turn's wait + TTFT + decode) sets throughput.
    def cycle(r):
        return r["sessions"] * r["window_s"] / max(1, r["requests"])
    prompt = shared["prompt_tokens"] / max(1, shared["requests"])
    published_shared, published_split = 348e3, 175e3  # tok/s at 112 sessions (split: mid of 156K-194K)
    lines.append(f"- Why the throughput ratio cannot be met with the published latencies: in a closed loop a lane's "
                 f"cycle (its recorded wait, capped at 300 s, plus TTFT plus decode) sets throughput. Here a lane "
                 f"sends a request every {cycle(shared):.0f} s with the shared pool and every {cycle(split):.0f} s "
                 f"with split pools at {top} sessions. At our mean prompt ({prompt / 1e3:.0f}K tokens) the published "
                 f"throughputs ({published_shared / 1e3:.0f}K vs ~{published_split / 1e3:.0f}K tok/s at 112) mean a "
                 f"cycle of {top * prompt / published_shared:.0f} s vs {top * prompt / published_split:.0f} s: the "
                 f"split arm would lose ~{top * prompt / published_split - top * prompt / published_shared:.0f} s "
                 "per turn. With a TTFT p90 of 19.3 s that needs the slowest tenth of its requests to wait many "
                 "minutes each, or time lost outside TTFT that the published figures do not show. An emulation that "
                 "matches the published TTFT distribution therefore cannot reproduce the 2× from latency alone; "
                 f"ours keeps the TTFT shape ({split['ttft_s']['p90'] / shared['ttft_s']['p90']:.1f}× at p90) and "
                 "the throughput gap stays small.")
    pby, rates = by_arm(production)
    pshared = pby[(max(rates), "shared")]
    lines.append(f"- Experiment 2's shared pool serves {pct(pshared['token_sources']['pool_share'])} of prompt tokens "
                 f"at {max(rates):g} req/s, not ≥ 50%, for the same reason: the GPU caches keep "
                 f"{pct(pshared['token_sources']['gpu_cache_share'])}.")
    if half:
        h = {(replay_report.load(r), r["pool_scope"]): r for r in half["production"]}
        a = {(replay_report.load(r), r["pool_scope"]): r for r in half["agentx"]}
        hs, ha = h.get((max(rates), "shared")), a.get((top, "shared"))
        if hs and ha:
            lines.append(f"- At half the GPU cache ({half['prefill_cache_tokens'] / 1e6:.1f}M tokens) the shared arm's "
                         f"sources come out at the published ones: experiment 1 at {top} sessions GPU "
                         f"{pct(ha['token_sources']['gpu_cache_share'])} / pool {pct(ha['token_sources']['pool_share'])} "
                         f"(published 54% / 40–41%), experiment 2 pool {pct(hs['token_sources']['pool_share'])} "
                         "(published 58%). We keep 9.0M as the default: it is the single server's calibration "
                         "(design.md's published server), and the four-server set-up does not publish its cache size.")
    lines.append("- Experiment 2's throughput is set by the arrival rate (a paced replay), so it does not compare "
                 "the arms; TTFT and token sources do.")
    return lines


def on_cluster(doc):
    """Experiment 1, short, on the namespace cluster: real stores behind capped veths."""
    out = ["### Experiment 1 on the namespace cluster (`scripts/run-cluster.sh`)", "",
           f"`{doc['command']}` (each arm on its own cluster): 4 network namespaces × 4 rails, each (server, rail) a veth "
           f"capped at {doc['rail_gbps']:g} Gbit/s each way (`tc tbf`), a storage service behind every one "
           "(16, each with a quarter of its server's 16.9M-token share) and, for *shared*, one master per part "
           "spread over the servers, for *split*, 4 masters on every server (`POOLS=split scripts/cluster.sh up`). "
           "The replay runs on server 0, so every restore and save to another server's stores crosses the capped "
           "veths. Throughput, TTFT and token sources are *emulated*; bytes through the fabric (every switch "
           "port's received bytes, from the veth counters, primers and handoff control included) and wall time "
           "are *measured*.", "",
           "| pool | system tok/s | TTFT p50 / p90 | GPU cache | pool | computed | reuse / ceiling | restored / saved "
           "(window) | bytes through the fabric | wall | errors |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        t, b = r["token_sources"], r["bytes"]
        out.append(f'| {r["pool_scope"]} | {r["throughput_tok_s"] / 1e3:,.0f}K '
                   f'| {r["ttft_s"]["p50"]:.2f} / {r["ttft_s"]["p90"]:.2f} s | {pct(t["gpu_cache_share"])} '
                   f'| {pct(t["pool_share"])} | {pct(t["computed_share"])} | {pct(t["reuse"])} / {pct(t["ceiling"])} '
                   f'| {b["restored"] / 1e6:,.0f} / {b["saved"] / 1e6:,.0f} MB | {r["fabric_bytes"] / 1e6:,.0f} MB '
                   f'| {machine_timings(r)["wall_s"]:.0f} s | {r["verification_errors"]} verification, {r["failed_requests"]} failed |')
    return out


def half_cache(doc, agentx, production):
    """The same top loads with half the prefill GPU cache, beside the default runs."""
    runs = doc["agentx"] + doc["production"]
    base = {(replay_report.load(r), r["pool_scope"], r.get("arrival_rate", 0) > 0): r for r in agentx + production}
    cache = doc["prefill_cache_tokens"]
    out = ["### Sensitivity: half the prefill GPU cache", "",
           f"`{doc['command'].replace('|', '` and `')}`: the highest load of each experiment again with each prefill "
           f"instance's GPU prefix cache at {cache / 1e6:.1f}M tokens instead of 9.0M. All figures *emulated*.", "",
           "| experiment | load | pool | GPU cache (9.0M → half) | pool | computed | reuse | system tok/s | TTFT p90 |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(runs, key=lambda r: (r.get("arrival_rate", 0) > 0, r["pool_scope"] != "shared")):
        paced = r.get("arrival_rate", 0) > 0
        b = base.get((replay_report.load(r), r["pool_scope"], paced))
        t = r["token_sources"]

        def pair(key, fmt=pct):
            return f"{fmt(b['token_sources'][key])} → {fmt(t[key])}" if b else fmt(t[key])
        tput = (f'{b["throughput_tok_s"] / 1e3:,.0f}K → ' if b else "") + f'{r["throughput_tok_s"] / 1e3:,.0f}K'
        p90 = (f'{b["ttft_s"]["p90"]:.2f} → ' if b else "") + f'{r["ttft_s"]["p90"]:.2f} s'
        out.append(f'| {"2" if paced else "1"} | {load_label(r)} | {r["pool_scope"]} | {pair("gpu_cache_share")} '
                   f'| {pair("pool_share")} | {pair("computed_share")} | {pair("reuse")} | {tput} | {p90} |')
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
               "cache recomputes its whole history (a cold 140K-token prompt is ~12 s of one PP4 instance on its own). Once that "
               "demand passes what prefill can compute, the closed loop holds every session in the queue: the KV "
               "gate wait and the prefill wait in the table are minutes long. Sessions then come back in queue order, "
               f"round robin. The live histories ({live} tokens, mean prompt per request) exceed the 9.0M-token "
               "GPU cache. Under round robin, LRU evicts each history just before it is reused (the textbook cyclic "
               "case), so reuse is 0 and the queue never drains.")
    out.append("- The published estimate (prefill computing about half of the prompt tokens at 112 sessions) is the "
               f"cache's share of the working set ({9e6 / (112 * largest):.0%} at 112 sessions of the histories above), which is what an order-independent policy would "
               "keep. LRU under round robin does not keep it. So we keep the emulation as it is. A fix in the engine "
               "would be a different eviction policy, not a change of emulation.")
    out.append("- The shared-vs-split comparison above does not rest on the collapse: the split arm computes at most "
               f"{pct(max(r['token_sources']['computed_share'] for r in four_server_runs if r['pool_scope'] == 'split'))} "
               "of its prompt tokens and keeps most of its reuse; no run collapses.")
    return out


def load_results(name):
    path = os.path.join(DOCS, "results", name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def production_plots():
    """Experiment 2's three plots, drawn from the committed results."""
    runs = load_results("production.json")["runs"]
    with tempfile.TemporaryDirectory() as tmp:
        modes = replay_report.by_mode(runs)
        replay_report.plot_throughput(modes, tmp)
        replay_report.plot_token_sources(runs, tmp)
        replay_report.plot_ttft(modes, tmp)
        copy_plots(tmp, "four-server-production")


def render(plots=None):
    first, second = load_results("four-server.json"), load_results("production.json")
    agentx, production = first["runs"], second["runs"]
    command, production_command = first["command"], second["command"]
    out = [BEGIN, "## Four servers, shared pool vs split pools (issue: the four-server experiment)", ""]
    wall = sum(machine_timings(r)["wall_s"] for r in agentx + production)
    out += [f"Run {first['date']} on {first['machine']} (`scripts/bench-four-server.sh`; {wall / 60:.0f} min of "
            "wall time for both experiments). The emulated cluster (`src/engine/topology.h`, `4x8-6p2d`): 4 "
            "servers × 8 GPUs, 6 prefill + 2 decode (TP4 + DCP4) instances in two groups, no prefill on its own "
            "group's decode server; a router per group places every request by power of two choices; one KV "
            "admission gate per decode instance (9M tokens). *shared*: one pool of 4 parts (by rail) over every "
            "server's memory (4 × 16.9M tokens, the published 768 GiB per server); *split*: each server its own "
            "4-part pool of 16.9M tokens, used only by its own prefill instances. Between servers, every handoff "
            "and every read or write of another server's pool memory queues on the emulated NICs (400 Gb/s "
            "each, `src/engine/rail_network.h`).", "",
            "Throughput, TTFT, token sources and rail traffic are *emulated* (the cost model's clock, published "
            "bytes per token); the KV itself is *measured*: every restore goes through real pools (embedded "
            "masters and storage services, one per part), every handoff through the handoff path, and every "
            "restored or handed-off byte is verified.", "",
            "### Experiment 1: the AgentX sweep", "",
            f"`{command}` (raw results in `docs/results/four-server.json`). PP4 prefill (max batched tokens 8,192; "
            "a request's chunks go through the four stages one after another, several requests fill the "
            "pipeline), admission wait 900 s, 3 warm-up requests per lane, output pinned to the recorded length.", ""]
    out += arm_table(agentx) + [""]
    out += ["![system throughput](img/four-server-throughput.png) "
            "![prompt-token sources](img/four-server-token_sources.png) ![TTFT](img/four-server-ttft.png)", "",
            "### Experiment 2: the production-style replay", "",
            f"`{production_command}` (raw results in `docs/results/production.json`). TP4 prefill (max batched "
            "tokens 16,384, no pipeline); 160 lanes, each starting partway into a session, its first turn (the "
            "primer, cold in every arm) excluded; the lanes' main turns arrive as one Poisson process at the rate "
            "shown, each arrival taking a lane whose next turn may go, at random; admission wait 30 s; output "
            "capped at 32,000 tokens (recorded lengths, no reasoning tokens added).", ""]
    out += arm_table(production) + [""]
    out += ["![system throughput](img/four-server-production-throughput.png) "
            "![prompt-token sources](img/four-server-production-token_sources.png) "
            "![TTFT](img/four-server-production-ttft.png)", ""]
    out += acceptance(agentx, production) + [""]
    seeds = load_results("four-server-seeds.json")
    if seeds:
        out += across_seeds(seeds) + [""]
    half = load_results("four-server-half-cache.json")
    out += misses(agentx, production, half) + [""]
    out.append("Published (design.md, 4 × 8 MI350X): AgentX shared 256K tok/s at 56 sessions → 389K at 96 → 348K "
               "at 112, TTFT p90 ≤ 2.3 s, reuse 94–96%, GPU cache 70% → 54%, pool 26% → 40–41%; split levels off "
               "at 156K–194K tok/s, pool 12–15%, reuse 79% → 65%, TTFT p90 3.9 s → 19.3 s. Production replay: "
               "shared pool 58% of prompt tokens, reuse 95–96%, TTFT ~1.0 s p50 and 1.7–1.8 s p90; split pool "
               "~11%, reuse 51–55%, TTFT p90 7–10 s.")
    out.append("")
    if half:
        out += half_cache(half, agentx, production) + [""]
    cluster = load_results("four-server-cluster.json")
    if cluster:
        out += on_cluster(cluster) + [""]
    fid = load_results("fidelity.json")
    if fid:
        out += fidelity(fid, agentx) + [""]
    out.append(END)
    if plots:
        copy_plots(plots, "four-server")
        production_plots()
    return "\n".join(out)


SEED_FIELDS = ("sessions", "pool_scope", "requests", "throughput_tok_s", "verification_errors", "failed_requests")


def collect_seeds(command, seed_files):
    """docs/results/four-server-seeds.json: Experiment 1's runs at each seed (SEED=FILE), summarised."""
    seeds = []
    for arg in seed_files:
        seed, path = arg.split("=", 1)
        with open(path) as f:
            runs = json.load(f)["runs"]
        seeds.append({"seed": int(seed), "runs": [
            {**{k: r[k] for k in SEED_FIELDS}, "reuse": r["token_sources"]["reuse"],
             "pool_share": r["token_sources"]["pool_share"], "ttft_p50_s": r["ttft_s"]["p50"],
             "ttft_p90_s": r["ttft_s"]["p90"]} for r in runs]})
    doc = {"command": re.sub(r"--seed \d+", "--seed S", command), "seeds": seeds}
    with open(os.path.join(DOCS, "results", "four-server-seeds.json"), "w") as f:
        json.dump(doc, f, indent=1)


def across_seeds(doc):
    """Experiment 1 at every seed run: what moves with the seed."""
    seeds = [s["seed"] for s in doc["seeds"]]
    runs = {(s["seed"], r["sessions"], r["pool_scope"]): r for s in doc["seeds"] for r in s["runs"]}
    loads = sorted({r["sessions"] for s in doc["seeds"] for r in s["runs"]})
    each = "/".join(str(s) for s in seeds)
    out = ["### Experiment 1 at more seeds", "",
           f"Experiment 1 at seeds {', '.join(map(str, seeds))} (`{doc['command']}`, raw results "
           f"`docs/results/four-server-seeds.json`; each cell seed {each}):", "",
           "| sessions | reuse, shared | reuse, split | shared / split throughput | TTFT p90, shared | TTFT p90, split |",
           "|---|---|---|---|---|---|"]
    ratios = []
    for n in loads:
        have = [s for s in seeds if (s, n, "shared") in runs and (s, n, "split") in runs]
        cell = lambda key, fmt, scope: " / ".join(fmt(runs[(s, n, scope)][key]) for s in have)
        ratio = [runs[(s, n, "shared")]["throughput_tok_s"] / runs[(s, n, "split")]["throughput_tok_s"] for s in have]
        ratios += [(n, x) for x in ratio]
        out.append(f"| {n} | {cell('reuse', pct, 'shared')} | {cell('reuse', pct, 'split')} | "
                   f"{' / '.join(f'{x:.2f}×' for x in ratio)} | {cell('ttft_p90_s', lambda v: f'{v:.2f} s', 'shared')} | "
                   f"{cell('ttft_p90_s', lambda v: f'{v:.2f} s', 'split')} |")
    spread = {scope: [max(runs[(s, n, scope)]["reuse"] for s in seeds) - min(runs[(s, n, scope)]["reuse"] for s in seeds)
                      for n in loads] for scope in ("shared", "split")}
    high = [x for n, x in ratios if n >= 96]
    clean = all(r["verification_errors"] == 0 and r["failed_requests"] == 0 for r in runs.values())
    out += ["", f"Reuse moves by at most {100 * max(spread['shared']):.1f} points across seeds with the shared pool and "
            f"{100 * max(spread['split']):.1f} with split pools; shared over split throughput at 96 and 112 sessions: "
            f"median {statistics.median(high):.2f}× ({min(high):.2f}× to {max(high):.2f}×) over the seeds; 0 verification "
            f"errors and 0 failed requests in every run: {yes(clean)}."]
    return out


def main():
    if sys.argv[1:2] == ["--collect-seeds"]:
        collect_seeds(sys.argv[2], sys.argv[3:])
        return
    if len(sys.argv) > 2:
        sys.exit(__doc__)
    write_section(render(*sys.argv[1:]), BEGIN, END)


if __name__ == "__main__":
    main()
