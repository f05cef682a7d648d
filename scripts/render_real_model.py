#!/usr/bin/env python3
"""Renders the real-model sections of docs/benchmarks.md (issue 43); nothing is typed in:
- "A real model on a real GPU" from docs/results/real-model.json (bench/gpu/real_model_probe.py:
  a Llama-3-8B-shaped model's prefill against copying its KV back from pinned host memory);
- "kvpool in a transformers model" from docs/results/real-model-pool.json (scripts/gpu-real-model.sh:
  kvpool_transformers restoring that model's cache from a `kvpool serve` pool, and real sessions
  turn by turn).

- "Attention that continues a cache on the flash kernel" from docs/results/real-model-lower-right.json
  (the same benchmarks with kvpool_attention's lower-right causal attention, and the sdpa turns of that
  run beside them).

usage: render_real_model.py                        (rewrites the three sections)
       render_real_model.py --collect OUT COMMIT   (first writes docs/results/real-model-pool.json from
                                                    a gpu-real-model.sh output folder measured at COMMIT)
       render_real_model.py --collect-lower-right OUT COMMIT   (likewise real-model-lower-right.json, from
                                                    its STEPS="pool-lower-right turns-lower-right pool turns")
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from render_benchmarks import write_section  # noqa: E402

BEGIN, END = "<!-- real-model:begin -->", "<!-- real-model:end -->"
POOL_BEGIN, POOL_END = "<!-- real-model-pool:begin -->", "<!-- real-model-pool:end -->"
DOCS_RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results")
RESULTS = os.path.join(DOCS_RESULTS, "real-model.json")
POOL_RESULTS = os.path.join(DOCS_RESULTS, "real-model-pool.json")
LR_BEGIN, LR_END = "<!-- real-model-lower-right:begin -->", "<!-- real-model-lower-right:end -->"
LR_RESULTS = os.path.join(DOCS_RESULTS, "real-model-lower-right.json")


def yes(flag):
    return "yes" if flag else "**no**"


EXACTNESS_HEADER = ("restored cache bitwise equal | turn's logits: restored = original cache (original rerun) | "
                    "greedy 32: restored = original (original rerun) | against recompute: max logit difference, "
                    "argmax agrees |")


def exactness_cells(x):
    """The four exactness cells of a row (both tables)."""
    logits = (("yes" if x["logits_restored_equal_original"] else f"no (max {x['logits_restored_max_diff']:.3g})")
              + " (" + ("equal" if x["logits_original_rerun_equal"]
                        else f"max {x['logits_original_rerun_max_diff']:.3g}") + ")")
    return (f"{yes(x['restored_cache_bitwise_equal'])} | {logits} | {x['greedy32_restored_agreeing']} of 32 agree "
            f"({x['greedy32_original_rerun_agreeing']} of 32) | "
            f"{x['logits_recompute_max_diff']:.3g}, {'yes' if x['recompute_argmax_agrees'] else 'no'}")


def table(mode):
    rows = ["| history | prefill | KV | KV back from pinned host | of pinned H2D | H2D / prefill | "
            "TTFT, history restored + turn | TTFT, recompute | " + EXACTNESS_HEADER,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    for x in mode["rows"]:
        if "error" in x:
            rows.append(f"| {x['history_tokens'] // 1024}K | {x['error']} |" + " |" * 10)
            continue
        rows.append(
            f"| {x['history_tokens'] // 1024}K | {1000 * x['prefill_s']:,.0f} ms | {x['kv_bytes'] / 1e9:.2f} GB | "
            f"{1000 * x['h2d_s']:.1f} ms ({x['h2d_gbps']:.1f} GB/s) | {x['h2d_over_pinned']:.2f} | "
            f"{x['h2d_over_prefill']:.3f} | {1000 * x['ttft_restored_s']:,.0f} ms | {1000 * x['ttft_recompute_s']:,.0f} ms | "
            f"{exactness_cells(x)} |")
    return rows


def mode_blocks(modes, draw, restored_from):
    """Each mode's command, its table (draw(mode)) and its speedups."""
    out = []
    for mode in modes:
        label = ("With `torch.use_deterministic_algorithms(True)`" if mode["deterministic_algorithms"]
                 else "With PyTorch's default kernels")
        done = [x for x in mode["rows"] if "error" not in x]
        speedups = ", ".join(f"{x['ttft_recompute_s'] / x['ttft_restored_s']:.1f}x at {x['history_tokens'] // 1024}K"
                             for x in done)
        out += ["", f"{label} (`{mode['command']}`):", "", *draw(mode), "",
                f"The turn's first token comes {speedups} sooner with the history restored{restored_from} than "
                "recomputed."]
    return out


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
    out += mode_blocks(r["modes"], table, "")
    out += ["", verdict(r["modes"]), END]
    return "\n".join(out)


def pool_table(mode):
    rows = ["| history | KV | prefill | save into the pool | restore from the pool | of pinned H2D | "
            "TTFT, restored + turn | TTFT, recompute | " + EXACTNESS_HEADER,
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    for x in mode["rows"]:
        if "error" in x:
            rows.append(f"| {x['history_tokens'] // 1024}K | {x['error']} |" + " |" * 10)
            continue
        restore = f"{1000 * x['restore_s']:.1f} ms ({x['restore_gbps']:.1f} GB/s)"
        if x["restore_status"] != "OK" or x["restored_tokens"] != x["history_tokens"]:
            restore += f", {x['restored_tokens']:,} tokens: {x['restore_status']}"
        rows.append(
            f"| {x['history_tokens'] // 1024}K | {x['kv_bytes'] / 1e9:.2f} GB | {1000 * x['prefill_s']:,.0f} ms | "
            f"{1000 * x['save_s']:,.0f} ms ({x['save_gbps']:.1f} GB/s) | {restore} | {x['restore_over_pinned']:.2f} | "
            f"{1000 * x['ttft_restored_s']:,.0f} ms (lookup {1000 * x['lookup_s']:.1f}) | "
            f"{1000 * x['ttft_recompute_s']:,.0f} ms | {exactness_cells(x)} |")
    return rows


SDPA_SLOW = (" The first of these is the process's first forward over a restored cache. For the others, "
             "transformers hands sdpa an explicit mask when a forward has a cache and more than one new token "
             "(masking_utils._ignore_causal_mask_sdpa skips it only for one new token or no cache), which keeps "
             "PyTorch off its flash kernel; from nothing it passes is_causal instead (the cost-model check below "
             "measures what that costs; python/kvpool_attention.py keeps such a forward on the flash kernel).")


def turns_section(t, why_slow=SDPA_SLOW):
    rows = ["| trace | turn | prompt | restored | computed | TTFT with the pool | TTFT, recompute | restore | "
            "save (after the turn) | same next token |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for x in t["turns"]:
        rows.append(f"| {x['trace']} | {x['turn']} | {x['in_tokens']:,} | {x['restored_tokens']:,} | "
                    f"{x['computed_tokens']:,} | {1000 * x['ttft_pool_s']:,.0f} ms | {1000 * x['ttft_recompute_s']:,.0f} ms | "
                    f"{1000 * x['restore_s']:.1f} ms | {1000 * x['save_s']:,.0f} ms | "
                    f"{'yes' if x['argmax_agrees'] else 'no'} |")
    turns = t["turns"]
    later = [x for x in turns if x["turn"] > 0]
    prompt = sum(x["in_tokens"] for x in turns)
    computed = sum(x["computed_tokens"] for x in turns)
    ratios = sorted(x["ttft_recompute_s"] / x["ttft_pool_s"] for x in later)
    summary = (f"Over {len(turns)} turns of {len(t['traces'])} sessions the pool arm computed {computed:,} of {prompt:,} "
               f"prompt tokens ({100 * computed / prompt:.1f}%; recompute: all of them). After each session's first "
               f"turn (nothing pooled yet), the first token came {statistics.median(ratios):.1f}x sooner with the pool "
               f"(median; {ratios[0]:.1f}x to {ratios[-1]:.1f}x over {len(ratios)} turns)."
               if ratios else "")
    slow = [x for x in later if x["ttft_pool_s"] >= 0.5 * x["ttft_recompute_s"]]
    if slow:
        summary += (" Where the pool arm was not at least twice as fast, the restore was not what took the time: " +
                    "; ".join(f"{x['trace']} turn {x['turn']} spent {1000 * x['restore_s']:.0f} ms of "
                              f"{1000 * x['ttft_pool_s']:,.0f} ms restoring {x['restored_tokens']:,} tokens and the rest "
                              f"computing {x['computed_tokens']:,}" for x in slow) +
                    "." + why_slow)
    return rows, summary


def render_pool(r):
    first = r["modes"][0]
    t = r["turns"]
    new = next((x["new_tokens"] for x in first["rows"] if "error" not in x), 0)
    out = [POOL_BEGIN, "## kvpool in a transformers model on a real GPU (issue 43, *measured*)", "",
           f"Run with `{r['command']}` on {r['date']} ({r['machine']}; PyTorch {first['torch']}, transformers "
           f"{first['transformers']}); raw results `docs/results/real-model-pool.json`. The model of the section "
           "above; its cache is a `kvpool_transformers.PooledKv` (python/kvpool_transformers.py): per layer, keys "
           "and values of [1, 8, tokens, 128] that the model's forwards write in place and the connector saves "
           f"from and restores into (each layer and KV head a connector layer; chunks of {first['chunk_tokens']} "
           f"tokens, stage objects of {first['stage_layers'][0] // 8} layers). The pool is `kvpool serve` on the same "
           "host (one master and one storage service, its segment mapped by the client), so the restore is the "
           "connector's GPU unpack reading the mapped segment, every object checked against its writer's checksum. "
           f"Per history: prefill into the pooled cache, save into the pool, the buffers wiped, then a new turn of "
           f"{new:,} tokens: *TTFT, restored + turn* is the lookup, the restore of the history and that turn's "
           "prefill; *recompute* one forward over history and turn from nothing; *of pinned H2D* the restore's rate "
           "over a plain pinned host-to-device copy of as many bytes (at most 4 GiB) in the same run. The "
           "exactness columns read as in the section above; the reference for *bitwise equal* is a host copy of "
           "the cache taken after the save."]
    out += mode_blocks(r["modes"], pool_table, " from the pool")
    out += ["", verdict(r["modes"])]
    warm = [w for mode in r["modes"] for w in mode.get("warmup", [])[:1]]
    if warm:
        restores = " and ".join(f"{w['restore_s']:.2f} s" for w in warm)
        saves = " and ".join(f"{w['save_s']:.2f} s" for w in warm)
        out += ["", "Each run's first save and first restore are in its warm-up, not the tables (kept in the raw "
                "results): the first restore of a process, which registers the store's mapped segment with CUDA, "
                f"took {restores} for {warm[0]['restored_tokens']:,} tokens; the first save {saves}."]
    rows, summary = turns_section(t)
    out += ["", f"Real sessions turn by turn (`{t['command']}`): the first {t['max_turns']} main-thread requests of "
            f"{', '.join(t['traces'])} (src/trace/testdata/weka-sample), each prompt exactly its recorded input length "
            "with the replay's token synthesis (one fixed block of tokens per hash id). Between turns the GPU keeps "
            "nothing (the session's KV left the GPU while the agent ran its tools: the case the pool is for); with "
            "the pool, the longest pooled prefix is restored and the rest computed, then the prompt's KV saved "
            "(timed apart, after the first token); without, the whole prompt is computed. Outputs are not decoded: "
            "the next prompt carries them as new tokens, as the replay models a turn. *Same next token*: the two "
            "arms' first tokens agree (random weights: the logits differ in the last bits, see above).", "",
            *rows, "", summary, POOL_END]
    return "\n".join(out)


def load_output(out_dir, name):
    """One JSON document of a gpu-real-model.sh output folder, or None when the run wrote none."""
    path = os.path.join(out_dir, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def collect(out_dir, commit):
    """docs/results/real-model-pool.json from scripts/gpu-real-model.sh's output folder."""
    modes = [m for m in (load_output(out_dir, n) for n in ("real-model-pool.json", "real-model-pool-deterministic.json"))
             if m]
    turns = load_output(out_dir, "real-model-turns.json")
    doc = {"command": "scripts/gpu-real-model.sh", "date": modes[0]["date"], "machine": modes[0]["machine"],
           "commit": commit, "modes": modes, "turns": turns}
    with open(POOL_RESULTS, "w") as f:
        json.dump(doc, f, indent=1)


def collect_lower_right(out_dir, commit):
    """docs/results/real-model-lower-right.json from a gpu-real-model.sh output folder of
    STEPS="pool-lower-right turns-lower-right pool turns": the lower-right runs and the sdpa runs beside them."""
    turns = load_output(out_dir, "real-model-turns-lower-right.json")
    mode = load_output(out_dir, "real-model-pool-lower-right.json")
    doc = {"command": "scripts/gpu-real-model.sh", "date": turns["date"], "machine": turns["machine"],
           "commit": commit, "modes": [mode] if mode else [], "turns": turns,
           "pool_sdpa": load_output(out_dir, "real-model-pool.json"),
           "turns_sdpa": load_output(out_dir, "real-model-turns.json")}
    with open(LR_RESULTS, "w") as f:
        json.dump(doc, f, indent=1)


def render_lower_right(r):
    t, sdpa = r["turns"], r.get("turns_sdpa")
    out = [LR_BEGIN, "### Attention that continues a cache on the flash kernel (*measured*)", "",
           f"Run with `{r['command']}` on {r['date']} ({r['machine']}, at {r['commit'][:7]}); raw results "
           "`docs/results/real-model-lower-right.json`. The same model and pool as above with "
           "`kvpool_attention.use_lower_right_causal_attention(model)` (python/kvpool_attention.py): a forward "
           "that continues a cache gets the lower-right causal mask as PyTorch's `causal_lower_right` bias, which "
           "runs on the flash kernel, instead of transformers' explicit mask; a forward from nothing is unchanged "
           "(`is_causal`)."]
    for mode in r["modes"]:
        out += ["", f"Restore versus recompute (`{mode['command']}`):", "", *pool_table(mode)]
    sdpa_pool = r.get("pool_sdpa")
    if sdpa_pool and r["modes"]:
        sdpa_rows = {x["history_tokens"]: x for x in sdpa_pool["rows"] if "error" not in x}
        pairs = [(x, sdpa_rows[x["history_tokens"]]) for x in r["modes"][0]["rows"]
                 if "error" not in x and x["history_tokens"] in sdpa_rows]
        out += ["", f"The turn of {pairs[0][0]['new_tokens']:,} tokens on the restored cache, against transformers' "
                f"sdpa in the same run (`{sdpa_pool['command']}`): " +
                "; ".join(f"{x['history_tokens'] // 1024}K {1000 * x['turn_on_restored_s']:,.0f} ms against "
                          f"{1000 * s['turn_on_restored_s']:,.0f} ms" for x, s in pairs) + "."] if pairs else []
    rows, summary = turns_section(t, "")
    out += ["", f"Real sessions turn by turn with it (`{t['command']}`):", "", *rows, "", summary]
    if sdpa:
        by_turn = {(x["trace"], x["turn"]): x for x in sdpa["turns"]}
        pairs = [(x, by_turn[(x["trace"], x["turn"])]) for x in t["turns"] if (x["trace"], x["turn"]) in by_turn]
        later = [(lr, sd) for lr, sd in pairs if lr["turn"] > 0]
        if later:
            ratios = sorted(sd["ttft_pool_s"] / lr["ttft_pool_s"] for lr, sd in later)
            agree = sum(lr["argmax_agrees"] for lr, _ in pairs)
            out += ["", f"Beside transformers' sdpa in the same run (`{sdpa['command']}`): with the pool, after each "
                    f"session's first turn, the first token came {statistics.median(ratios):.2f}x sooner with the "
                    f"lower-right attention (median; {ratios[0]:.2f}x to {ratios[-1]:.2f}x over {len(ratios)} turns); "
                    f"the pool arm's next token agreed with the recompute's in {agree} of {len(pairs)} turns."]
    out.append(LR_END)
    return "\n".join(out)


def main():
    if sys.argv[1:2] == ["--collect"]:
        collect(sys.argv[2], sys.argv[3])
    if sys.argv[1:2] == ["--collect-lower-right"]:
        collect_lower_right(sys.argv[2], sys.argv[3])
    if os.path.exists(LR_RESULTS):
        with open(LR_RESULTS) as f:
            write_section(render_lower_right(json.load(f)), LR_BEGIN, LR_END)
    for path, begin, end, draw in ((RESULTS, BEGIN, END, render), (POOL_RESULTS, POOL_BEGIN, POOL_END, render_pool)):
        if not os.path.exists(path):
            sys.exit(f"render_real_model: no {path}: run scripts/gpu-real-model.sh on the GPU machine")
        with open(path) as f:
            write_section(draw(json.load(f)), begin, end)


if __name__ == "__main__":
    main()
