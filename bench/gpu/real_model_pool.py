"""Restore from kvpool versus recompute on a real model (issue 43): the Llama-3-8B-shaped model of
real_model_probe.py (random bf16 weights, sdpa) with its cache in kvpool_transformers.PooledKv,
the pool a separate `kvpool serve` process on this host (--pool). For each history length, in
one run:

- prefill of the history into the pooled cache, and its save into the pool (pack on the GPU,
  put into the store's segment);
- the cache wiped, then the history's KV restored from the pool into it (lookup, then the
  connector's GPU unpack reading the store's mapped segment, checksums verified) against a plain
  pinned H2D copy of as many bytes (real_model_probe.pinned_h2d_gbps);
- TTFT of a new turn of NEW tokens with the history restored (lookup + restore + the turn's
  prefill) against recomputing history and turn from nothing;
- exactness: the restored cache bitwise equal to the saved one (a host copy taken after the
  save); the turn's last logits from the restored cache against the original cache's, and the
  original cache against itself; 32 greedy tokens from each; the largest logit difference
  against the recompute and whether its argmax agrees.

Every figure is measured. Writes one JSON document (--out) and prints each row.

usage: python3 bench/gpu/real_model_pool.py --pool HOST:PORT [--histories 8192,...] [--new 1700]
                                            [--deterministic] [--out real-model-pool.json]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # kvpool_transformers
import real_model_probe as probe  # noqa: E402


@torch.no_grad()
def host_copy(pool, length):
    """Every layer's keys and values [0, length) in host memory: the reference a restore must equal."""
    return [(k[:, :, :length].to("cpu"), v[:, :, :length].to("cpu")) for k, v in pool.buffers]


@torch.no_grad()
def equal_to(pool, reference):
    return all(torch.equal(k[:, :, :rk.shape[2]], rk.to("cuda")) and torch.equal(v[:, :, :rv.shape[2]], rv.to("cuda"))
               for (k, v), (rk, rv) in zip(pool.buffers, reference))


def wipe(pool):
    for k, v in pool.buffers:
        k.zero_()
        v.zero_()
    torch.cuda.synchronize()


@torch.no_grad()
def measure(model, pool, history, new):
    ids, turn = probe.tokens(history, 1), probe.tokens(new, 2)
    prompt = torch.cat([ids, turn], dim=1)
    cache = pool.new_cache()
    _, prefill_s = probe.timed(lambda: probe.last_logits(model, ids, cache))
    saved, save_s = probe.timed(lambda: pool.save(cache, ids))
    kv_bytes = history * pool.geometry.bytes_per_token

    # The original cache: the turn twice (its run-to-run spread) and 32 greedy tokens twice.
    original = probe.timed(lambda: probe.last_logits(model, turn, cache))
    probe.rewind(cache, history)
    again = probe.last_logits(model, turn, cache)
    probe.rewind(cache, history)
    first = int(torch.argmax(original[0]))
    greedy_original = probe.greedy(model, cache, first, 32)
    greedy_rerun = probe.greedy(model, cache, first, 32)
    reference = host_copy(pool, history)

    # Restore: wiped buffers, a new cache, the longest pooled prefix of history + turn.
    wipe(pool)
    cache = pool.new_cache()
    torch.cuda.synchronize()
    got = pool.restore(cache, prompt)
    restored_equal = equal_to(pool, reference)
    del reference
    restored, turn_s = probe.timed(lambda: probe.last_logits(model, prompt[:, got.end_token:], cache))
    probe.rewind(cache, history)
    greedy_restored = probe.greedy(model, cache, int(torch.argmax(restored)), 32)
    del cache

    recompute, recompute_s = probe.timed(lambda: probe.last_logits(model, prompt))
    restore_bytes = got.restored_tokens * pool.geometry.bytes_per_token
    row = {
        "history_tokens": history, "new_tokens": new, "kv_bytes": kv_bytes,
        "prefill_s": prefill_s, "save_s": save_s, "save_gbps": kv_bytes / save_s / 1e9,
        "save_objects_put": saved.get("objects_put"), "save_status": saved["status"],
        "restore_status": got.status, "restored_tokens": got.restored_tokens, "restore_end_token": got.end_token,
        "lookup_s": got.lookup_s, "restore_s": got.restore_s,
        "restore_gbps": restore_bytes / got.restore_s / 1e9 if got.restore_s else 0.0,
        "turn_on_cache_s": original[1], "turn_on_restored_s": turn_s,
        "ttft_restored_s": got.lookup_s + got.restore_s + turn_s, "ttft_recompute_s": recompute_s,
        **probe.exactness(restored_equal, original[0], again, restored, recompute,
                          greedy_original, greedy_rerun, greedy_restored),
    }
    row["pinned_h2d_gbps"] = probe.pinned_h2d_gbps(kv_bytes)
    row["restore_over_pinned"] = row["restore_gbps"] / row["pinned_h2d_gbps"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", required=True, help="the kvpool master (kvpool serve --listen)")
    probe.add_run_arguments(parser, "real-model-pool.json")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(args.deterministic)
    histories = [int(x) for x in args.histories.split(",")]
    model = probe.build_model(args.attention)
    # One set of buffers for the longest prompt (and 33 more tokens for the greedy runs).
    pool = probe.pooled_kv(args, model, max(histories) + args.new + 33)
    # Warm-up: kernels' first launch, the allocator, and the first restores' mapping of the store's
    # segment; kept in the results (the first restore of a process is slower).
    warmup = [measure(model, pool, n, 64) for n in (1024, 4096)]
    doc = probe.describe_pool_run(args, "bench/gpu/real_model_pool.py", pool)
    doc.update({"warmup": warmup, "rows": []})
    for history in histories:
        try:
            row = measure(model, pool, history, args.new)
        except torch.OutOfMemoryError as e:
            row = {"history_tokens": history, "new_tokens": args.new, "error": f"out of GPU memory: {e}"[:300]}
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        doc["rows"].append(row)
        doc["connector_metrics"] = pool.metrics()
        probe.write_json(doc, args.out)  # after every row: a run cut short keeps what it measured


if __name__ == "__main__":
    main()
