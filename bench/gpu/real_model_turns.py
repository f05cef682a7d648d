"""Sessions of real AgentX traces through a real model, turn by turn, with and without the pool
(issue 43's multi-turn run). The model is real_model_probe.py's Llama-3-8B shape (random bf16
weights, sdpa or --attention lower-right); the pool a separate `kvpool serve` process on this host (--pool).

Each main-thread request of a trace becomes a prompt of exactly its recorded `in` tokens, as the
replay builds them (docs: the AgentX format): every hash id is a fixed block of block_size token
ids (the same id, the same tokens, within one trace), the partial tail block fresh tokens. Per
turn, two arms in turn:

- pool: the GPU keeps nothing between turns (the case the pool is for: the session's KV left the
  GPU while the agent ran its tools); the longest pooled prefix is restored into an empty
  PooledKv cache, the rest prefilled, TTFT = lookup + restore + that prefill; then the prompt's
  KV is saved into the pool (timed apart: off the critical path);
- recompute: the whole prompt prefilled from nothing.

The recorded output is not decoded: the next turn's prompt carries it as new tokens (the
replay's model of a turn), so only first-token latency is measured. Subagent requests are left
out (their contexts are their own). Writes one JSON document (--out) and prints each turn.

usage: python3 bench/gpu/real_model_turns.py --pool HOST:PORT [--traces trace_0174,...]
                                             [--max-turns 6] [--out real-model-turns.json]
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # kvpool_transformers
import real_model_probe as probe  # noqa: E402

SAMPLE = os.path.join(HERE, "..", "..", "src", "trace", "testdata", "weka-sample")


def main_thread_prompts(path, max_turns):
    """(trace id, [token arrays of its first max_turns main-thread requests])."""
    with open(path) as f:
        trace = json.load(f)
    salt = zlib.crc32(trace["id"].encode())
    block = trace["block_size"]
    vocab = probe.LLAMA3_8B["vocab_size"]
    prompts = []
    requests = [r for r in trace["requests"] if r.get("type") in ("n", "s")]
    for index, r in enumerate(requests[:max_turns]):
        blocks = [np.random.default_rng([salt, h]).integers(0, vocab, block) for h in r["hash_ids"]]
        tail = np.random.default_rng([salt, 1 << 40, index]).integers(0, vocab, r["in"] - block * len(r["hash_ids"]))
        prompts.append(np.concatenate(blocks + [tail]).astype(np.int64))
    return trace["id"], prompts


@torch.no_grad()
def turn_with_pool(model, pool, ids):
    def first_token():
        cache = pool.new_cache()
        got = pool.restore(cache, ids)
        return got, probe.last_logits(model, ids[:, got.end_token:], cache), cache
    (got, logits, cache), ttft_s = probe.timed(first_token)
    saved, save_s = probe.timed(lambda: pool.save(cache, ids))
    return {"ttft_pool_s": ttft_s, "restored_tokens": got.restored_tokens, "computed_tokens": ids.shape[1] - got.end_token,
            "lookup_s": got.lookup_s, "restore_s": got.restore_s, "restore_status": got.status,
            "save_s": save_s, "save_status": saved["status"], "save_objects_put": saved.get("objects_put")}, logits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", required=True, help="the kvpool master (kvpool serve --listen)")
    parser.add_argument("--traces", default="trace_0174,trace_0058,trace_0001",
                        help="files of src/trace/testdata/weka-sample, without .json")
    parser.add_argument("--max-turns", type=int, default=6, help="main-thread turns per trace")
    probe.add_model_arguments(parser)
    parser.add_argument("--out", default="real-model-turns.json")
    args = parser.parse_args()
    sessions = [main_thread_prompts(os.path.join(SAMPLE, name + ".json"), args.max_turns)
                for name in args.traces.split(",")]
    longest = max(len(p) for _, prompts in sessions for p in prompts)
    torch.use_deterministic_algorithms(args.deterministic)
    model = probe.build_model(args.attention)
    pool = probe.pooled_kv(args, model, longest)
    with torch.no_grad():  # warm-up: kernels' first launch, the allocator, the first restore's mapping
        warm = probe.tokens(1024, 0)
        turn_with_pool(model, pool, warm)
        turn_with_pool(model, pool, warm)
        probe.last_logits(model, warm)
    doc = probe.describe_pool_run(args, "bench/gpu/real_model_turns.py", pool)
    doc.update({"traces": args.traces.split(","), "max_turns": args.max_turns, "turns": []})
    for trace_id, prompts in sessions:
        for index, prompt in enumerate(prompts):
            ids = torch.from_numpy(prompt).view(1, -1).cuda()
            row, logits = turn_with_pool(model, pool, ids)
            recompute, row["ttft_recompute_s"] = probe.timed(lambda: probe.last_logits(model, ids))
            row.update({"trace": trace_id, "turn": index, "in_tokens": ids.shape[1],
                        "argmax_agrees": int(torch.argmax(logits)) == int(torch.argmax(recompute)),
                        "logits_max_diff": float((logits - recompute).abs().max())})
            print(json.dumps(row), flush=True)
            doc["turns"].append(row)
            doc["connector_metrics"] = pool.metrics()
            probe.write_json(doc, args.out)  # after every turn: a run cut short keeps what it measured


if __name__ == "__main__":
    main()
