"""Restore versus recompute on a real model (issue 43, the bound): a Llama-3-8B-shaped transformers
model built from its config with random bf16 weights (its FLOPs and its KV are the real one's),
sdpa attention, on one GPU. For each history length it measures, in one run:

- prefill of the history (one forward, the cache filled), and the KV it leaves;
- the KV copied to pinned host memory and back into the cache's own tensors (so that 128K fits an
  80 GB card: no second copy on the GPU), against a plain pinned H2D copy of as many bytes;
- a new turn of NEW tokens on the restored cache (TTFT with the history restored = the H2D back
  + that prefill) against recomputing history and turn from nothing (TTFT without a pool);
- exactness: the restored cache bitwise equal to the saved one; the turn's last logits from the
  restored cache against the original cache's (bitwise, and the run-to-run spread of the original
  cache itself); 32 greedy tokens from each; the largest logit difference against the recompute
  and whether its greedy token agrees.

kvpool's own restore path is not in this probe: it measures what kvpool restores against.
Every figure is measured. Writes one JSON document (--out) and prints it.

usage: python3 bench/gpu/real_model_probe.py [--histories 8192,32768,65536,131072] [--new 1700]
                                             [--out real-model.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import transformers
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

# Llama-3-8B's shape (config.json of the published model).
LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, max_position_embeddings=262144)


def build_model(attention="sdpa"):
    """The model, with transformers' sdpa attention or kvpool_attention's lower-right causal one
    (a forward continuing a cache on the flash kernel)."""
    torch.manual_seed(0)
    config = LlamaConfig(**LLAMA3_8B, attn_implementation="sdpa")
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    if attention == "lower-right":
        import kvpool_attention
        kvpool_attention.use_lower_right_causal_attention(model)
    return model.eval()


def kv_tensors(cache):
    """Every key and value tensor of the cache, layer by layer ([batch, kv heads, tokens, head dim])."""
    if hasattr(cache, "layers"):
        return [t for layer in cache.layers for t in (layer.keys, layer.values)]
    return [t for pair in zip(cache.key_cache, cache.value_cache) for t in pair]


def compact(cache):
    """Makes each cache tensor contiguous (a turn appends by concatenation and crop leaves a view of
    the longer tensor) and returns them: restore then writes each with one plain copy."""
    if hasattr(cache, "layers"):
        for layer in cache.layers:
            layer.keys, layer.values = layer.keys.contiguous(), layer.values.contiguous()
    else:
        for i in range(len(cache.key_cache)):
            cache.key_cache[i] = cache.key_cache[i].contiguous()
            cache.value_cache[i] = cache.value_cache[i].contiguous()
    return kv_tensors(cache)


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def tokens(n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randint(0, LLAMA3_8B["vocab_size"], (1, n), device="cuda", generator=g)


@torch.no_grad()
def last_logits(model, ids, cache=None):
    """The last position's logits (float32) of a forward over ids, on cache (grown by ids) or none."""
    out = model(ids, past_key_values=cache, use_cache=cache is not None, logits_to_keep=1)
    return out.logits[0, -1].float()


def rewind(cache, length):
    """Drops what a forward appended to cache after its first `length` tokens."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


@torch.no_grad()
def greedy(model, cache, first, steps):
    """`steps` greedy tokens continuing cache from token `first`; the cache is rewound after."""
    start, out, tok = cache.get_seq_length(), [], first
    for _ in range(steps):
        tok = int(torch.argmax(last_logits(model, torch.tensor([[tok]], device="cuda"), cache)))
        out.append(tok)
    rewind(cache, start)
    return out


def agreeing(a, b):
    """How many tokens two greedy continuations share before they first differ."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def pinned_h2d_gbps(nbytes, reps=5):
    """A plain pinned-host to device copy of nbytes (capped at 4 GiB): the bound of this machine."""
    n = min(nbytes, 4 << 30)
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    dev.copy_(host, non_blocking=True)  # warm-up
    times = [timed(lambda: dev.copy_(host, non_blocking=True))[1] for _ in range(reps)]
    del host, dev
    return n / statistics.median(times) / 1e9


@torch.no_grad()
def probe(model, history, new):
    ids, turn = tokens(history, 1), tokens(new, 2)
    cache = DynamicCache()
    _, prefill_s = timed(lambda: last_logits(model, ids, cache))
    kv = kv_tensors(cache)
    kv_bytes = sum(t.numel() * t.element_size() for t in kv)
    # Save: to pinned host memory, as a pool's segment holds it.
    saved = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in kv]
    for s, t in zip(saved, kv):
        s.copy_(t)
    del kv

    # The original cache's own run-to-run spread: the same turn twice on it.
    original = timed(lambda: last_logits(model, turn, cache))
    rewind(cache, history)
    again = last_logits(model, turn, cache)
    rewind(cache, history)
    first = int(torch.argmax(original[0]))
    greedy_original = greedy(model, cache, first, 32)
    greedy_rerun = greedy(model, cache, first, 32)

    # Restore: wipe the cache and copy the saved KV back into its own (contiguous) tensors.
    kv = compact(cache)
    for t in kv:
        t.zero_()
    _, h2d_s = timed(lambda: [t.copy_(s, non_blocking=True) for t, s in zip(kv, saved)])
    restored_equal = all(torch.equal(t, s.to("cuda", non_blocking=True)) for t, s in zip(kv, saved))
    restored, turn_s = timed(lambda: last_logits(model, turn, cache))
    rewind(cache, history)
    greedy_restored = greedy(model, cache, int(torch.argmax(restored)), 32)
    del saved

    # No pool: history and turn computed from nothing (no cache kept: it would not fit at 128K on 80 GB).
    del cache, kv
    torch.cuda.empty_cache()
    recompute, recompute_s = timed(lambda: last_logits(model, torch.cat([ids, turn], dim=1)))
    row = {
        "history_tokens": history, "new_tokens": new,
        "prefill_s": prefill_s, "kv_bytes": kv_bytes,
        "h2d_s": h2d_s, "h2d_gbps": kv_bytes / h2d_s / 1e9, "h2d_over_prefill": h2d_s / prefill_s,
        "turn_on_cache_s": original[1], "turn_on_restored_s": turn_s,
        "ttft_restored_s": h2d_s + turn_s, "ttft_recompute_s": recompute_s,
        **exactness(restored_equal, original[0], again, restored, recompute,
                    greedy_original, greedy_rerun, greedy_restored),
    }
    row["pinned_h2d_gbps"] = pinned_h2d_gbps(kv_bytes)
    row["h2d_over_pinned"] = row["h2d_gbps"] / row["pinned_h2d_gbps"]
    return row


def exactness(restored_equal, original, rerun, restored, recompute, greedy_original, greedy_rerun, greedy_restored):
    """The exactness fields of a row: the turn's last logits from the original cache (twice: its
    run-to-run spread), from the restored cache and from a recompute, and 32 greedy tokens of each."""
    return {
        "restored_cache_bitwise_equal": restored_equal,
        "logits_original_rerun_equal": bool(torch.equal(original, rerun)),
        "logits_original_rerun_max_diff": float((original - rerun).abs().max()),
        "logits_restored_equal_original": bool(torch.equal(restored, original)),
        "logits_restored_max_diff": float((restored - original).abs().max()),
        "greedy32_restored_equal_original": greedy_restored == greedy_original,
        "greedy32_restored_agreeing": agreeing(greedy_restored, greedy_original),
        "greedy32_original_rerun_equal": greedy_rerun == greedy_original,
        "greedy32_original_rerun_agreeing": agreeing(greedy_rerun, greedy_original),
        "logits_recompute_max_diff": float((recompute - restored).abs().max()),
        "recompute_argmax_agrees": int(torch.argmax(recompute)) == int(torch.argmax(restored)),
    }


def add_model_arguments(parser):
    """How the model computes: its attention and whether its kernels are deterministic."""
    parser.add_argument("--attention", choices=["sdpa", "lower-right"], default="sdpa",
                        help="transformers' sdpa, or kvpool_attention's lower-right causal attention")
    parser.add_argument("--deterministic", action="store_true",
                        help="torch.use_deterministic_algorithms(True) (CUBLAS_WORKSPACE_CONFIG must be set)")


def add_run_arguments(parser, out):
    """The options every restore-versus-recompute run takes."""
    parser.add_argument("--histories", default="8192,32768,65536,131072")
    parser.add_argument("--new", type=int, default=1700, help="tokens of the new turn")
    add_model_arguments(parser)
    parser.add_argument("--out", default=out)


# The pooled runs' model id (what names the weights in the pool's namespace).
MODEL_ID = "llama-3-8b-shape@random-seed0"


def pooled_kv(args, model, max_tokens):
    """A kvpool_transformers.PooledKv for `model` on the pool at args.pool. Deterministic kernels
    and another attention compute other bf16 bits than the default ones: their KV gets its own
    namespace, so the exactness checks compare a cache with what this run saved, not another run's."""
    import kvpool
    import kvpool_transformers
    model_id = MODEL_ID + ("|deterministic-algorithms" if args.deterministic else "")
    model_id += "" if args.attention == "sdpa" else f"|attention:{args.attention}"
    return kvpool_transformers.PooledKv.for_model(kvpool.Client(args.pool), model, model_id, max_tokens=max_tokens)


def describe_pool_run(args, script, pool):
    """describe_run of a run against a `kvpool serve` pool through `pool` (a PooledKv)."""
    doc = describe_run(args, script)
    doc.update({"pool": "kvpool serve on this host (shm segment mapped by the client)", "model_id": pool.model_id,
                "chunk_tokens": pool.chunk_tokens, "stage_layers": pool.spec.stage_layers})
    return doc


def write_json(doc, path):
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def describe_run(args, script):
    """What every result of these scripts records: the command, date, machine, versions, the model."""
    argv, rest = [], iter(sys.argv[1:])
    for a in rest:  # where the output goes and the pool's port say nothing of what was measured
        if a in ("--out", "--pool"):
            next(rest, None)
            if a == "--pool":
                argv += [a, "HOST:PORT"]
        else:
            argv.append(a)
    return {"command": " ".join(["python3", script] + argv),
            "deterministic_algorithms": args.deterministic,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} cores, "
                       f"{torch.cuda.get_device_name()}",
            "device": torch.cuda.get_device_name(), "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
            "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
            "model": {"shape": "Llama-3-8B", **LLAMA3_8B, "dtype": "bfloat16", "attention": args.attention,
                      "weights": "random (torch.manual_seed(0))"}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, "real-model.json")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(args.deterministic)
    model = build_model(args.attention)
    with torch.no_grad():  # warm-up: kernels' first launch, the allocator
        last_logits(model, tokens(1024, 0), DynamicCache())
    rows = []
    for history in (int(x) for x in args.histories.split(",")):
        try:
            rows.append(probe(model, history, args.new))
        except torch.OutOfMemoryError as e:
            rows.append({"history_tokens": history, "new_tokens": args.new, "error": f"out of GPU memory: {e}"[:300]})
        torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    doc = describe_run(args, "bench/gpu/real_model_probe.py")
    doc["rows"] = rows
    write_json(doc, args.out)


if __name__ == "__main__":
    main()
