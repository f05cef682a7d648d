#!/usr/bin/env python3
"""Renders the "A real model on a real GPU" section of docs/benchmarks.md from
docs/results/real-model.json, which bench/gpu/real_model_probe.py writes on the GPU machine
(issue 43): a Llama-3-8B-shaped model's prefill against copying its KV back from pinned host
memory, and what the restored cache gives. Nothing is typed in.

usage: render_real_model.py   (rewrites docs/benchmarks.md between its real-model markers)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- real-model:begin -->", "<!-- real-model:end -->"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "real-model.json")


def yes(flag):
    return "yes" if flag else "**no**"


def table(mode):
    rows = ["| history | prefill | KV | KV back from pinned host | of pinned H2D | H2D / prefill | "
            "TTFT, history restored + turn | TTFT, recompute | restored cache bitwise equal | turn's logits: "
            "restored = original cache (original rerun) | greedy 32: restored = original (original rerun) | "
            "against recompute: max logit difference, argmax agrees |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    for x in mode["rows"]:
        if "error" in x:
            rows.append(f"| {x['history_tokens'] // 1024}K | {x['error']} |" + " |" * 10)
            continue
        logits = (("yes" if x["logits_restored_equal_original"] else f"no (max {x['logits_restored_max_diff']:.3g})")
                  + " (" + ("equal" if x["logits_original_rerun_equal"]
                            else f"max {x['logits_original_rerun_max_diff']:.3g}") + ")")
        rows.append(
            f"| {x['history_tokens'] // 1024}K | {1000 * x['prefill_s']:,.0f} ms | {x['kv_bytes'] / 1e9:.2f} GB | "
            f"{1000 * x['h2d_s']:.1f} ms ({x['h2d_gbps']:.1f} GB/s) | {x['h2d_over_pinned']:.2f} | "
            f"{x['h2d_over_prefill']:.3f} | {1000 * x['ttft_restored_s']:,.0f} ms | {1000 * x['ttft_recompute_s']:,.0f} ms | "
            f"{yes(x['restored_cache_bitwise_equal'])} | {logits} | {x['greedy32_restored_agreeing']} of 32 agree "
            f"({x['greedy32_original_rerun_agreeing']} of 32) | "
            f"{x['logits_recompute_max_diff']:.3g}, {'yes' if x['recompute_argmax_agrees'] else 'no'} |")
    return rows


def verdict(modes):
    """What the exactness columns say together, from the figures."""
    rows = [x for mode in modes for x in mode["rows"] if "error" not in x]
    det = [x for mode in modes if mode["deterministic_algorithms"] for x in mode["rows"] if "error" not in x]
    loose = [x for mode in modes if not mode["deterministic_algorithms"] for x in mode["rows"] if "error" not in x]
    text = [f"The restored cache was bitwise equal to the saved one in {sum(x['restored_cache_bitwise_equal'] for x in rows)} "
            f"of {len(rows)} runs, and the turn's logits from it equal to the original cache's in "
            f"{sum(x['logits_restored_equal_original'] for x in rows)} of {len(rows)}."]
    if loose:
        reruns = sorted(x["greedy32_original_rerun_agreeing"] for x in loose)
        text.append(f"With the default kernels, decoding one token at a time is not run-to-run deterministic: the "
                    f"original cache continued twice agreed on {reruns[0]} to {reruns[-1]} of 32 greedy tokens, so a "
                    "restored cache cannot be judged on greedy agreement there.")
    if det:
        text.append(f"With deterministic algorithms the restored cache's 32 greedy tokens equal the original's in "
                    f"{sum(x['greedy32_restored_equal_original'] for x in det)} of {len(det)} runs (the original "
                    f"with itself: {sum(x['greedy32_original_rerun_equal'] for x in det)} of {len(det)}), at the "
                    "price of a slower prefill.")
    worst = max(x["logits_recompute_max_diff"] for x in rows)
    text.append(f"A full recompute differs from continuing a cache by up to {worst:.2f} in the logits (bf16 sums in "
                f"another order), with the same next token in {sum(x['recompute_argmax_agrees'] for x in rows)} of "
                f"{len(rows)} runs.")
    return " ".join(text)


def render(r):
    first = r["modes"][0]
    m = first["model"]
    new = next((x["new_tokens"] for x in first["rows"] if "error" not in x), 0)
    out = [BEGIN, "## A real model on a real GPU: restore versus recompute (issue 43, *measured*)", "",
           f"Run with `{r['command']}` on {r['date']} ({r['machine']}; PyTorch {first['torch']}, transformers "
           f"{first['transformers']}); raw results `docs/results/real-model.json`. A {m['shape']}-shaped "
           f"`LlamaForCausalLM` built from its config with random {m['dtype']} weights (hidden {m['hidden_size']}, "
           f"{m['num_hidden_layers']} layers, {m['num_attention_heads']} heads, {m['num_key_value_heads']} KV heads, "
           f"MLP {m['intermediate_size']}, vocab {m['vocab_size']}: its FLOPs and its KV are the real model's), "
           f"{m['attention']} attention, one forward over the whole history. Its KV is copied to pinned host memory "
           "(what a pool's mapped segment holds), the cache wiped, and the KV copied back into the cache's own "
           "tensors; *of pinned H2D* is that copy's rate over a plain pinned host-to-device copy of as many bytes "
           f"(at most 4 GiB) in the same run. Then a new turn of {new:,} tokens: *TTFT, history restored* is the copy "
           "back plus that turn's prefill on the restored cache; *recompute* is one forward over history and turn "
           "from nothing. The logits compared are the turn's last position's; *original rerun* is the same on the "
           "original cache a second time, the run-to-run spread that the restored cache is judged against; greedy "
           "32 continues each cache 32 tokens one at a time. kvpool's own restore path is not in this probe: this "
           "is the bound it works against (kvpool's restore from a mapped segment against pinned H2D: the GPU "
           "section above)."]
    for mode in r["modes"]:
        label = ("With `torch.use_deterministic_algorithms(True)`" if mode["deterministic_algorithms"]
                 else "With PyTorch's default kernels")
        done = [x for x in mode["rows"] if "error" not in x]
        speedups = ", ".join(f"{x['ttft_recompute_s'] / x['ttft_restored_s']:.1f}x at {x['history_tokens'] // 1024}K"
                             for x in done)
        out += ["", f"{label} (`{mode['command']}`):", "", *table(mode), "",
                f"The turn's first token comes {speedups} sooner with the history restored than recomputed."]
    out += ["", verdict(r["modes"]), END]
    return "\n".join(out)


def main():
    if not os.path.exists(RESULTS):
        sys.exit(f"render_real_model: no {RESULTS}: run bench/gpu/real_model_probe.py on the GPU machine")
    with open(RESULTS) as f:
        write_section(render(json.load(f)), BEGIN, END)


if __name__ == "__main__":
    main()
