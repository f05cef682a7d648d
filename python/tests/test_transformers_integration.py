"""kvpool_transformers without torch: a model config's cache geometry and what is refused, the
namespace and stage split, and save/restore of head-major [1, kv_heads, tokens, head_dim]
buffers (numpy, the CPU packer) through a real in-process pool. The transformers cache classes
and the GPU path run in tests/gpu/test_transformers_pool.py."""
import numpy as np
import pytest

import kvpool
import kvpool_transformers as kt

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256)
CHUNK = 64


def test_llama3_8b_geometry_and_stage_objects():
    g = kt.geometry_from_config(LLAMA3_8B, "bfloat16", 2)
    assert (g.num_layers, g.kv_heads, g.head_dim) == (32, 8, 128)
    assert g.bytes_per_token == 131072  # 128 KiB per token: 17.2 GB for 128K tokens
    spec = kt.kv_spec(g, "llama-3-8b@test")
    assert spec.stage_layers == [64, 64, 64, 64]  # 8 model layers x 8 KV heads per stage object
    assert spec.stage_object_bytes(0) == 8 << 20
    assert kt.stage_layers(kt.geometry_from_config(dict(LLAMA3_8B, num_hidden_layers=30), "bfloat16", 2), 8) == \
        [64, 64, 64, 48]


def test_the_namespace_separates_models_dtypes_and_chunk_sizes():
    g = kt.geometry_from_config(LLAMA3_8B, "bfloat16", 2)
    base = kt.kv_spec(g, "llama-3-8b@a").namespace
    assert kt.kv_spec(g, "llama-3-8b@b").namespace != base
    assert kt.kv_spec(kt.geometry_from_config(LLAMA3_8B, "float16", 2), "llama-3-8b@a").namespace != base
    assert kt.kv_spec(g, "llama-3-8b@a", chunk_tokens=128).namespace != base
    assert kt.kv_spec(g, "llama-3-8b@a", layers_per_stage=4).namespace != base


@pytest.mark.parametrize("config, message", [
    (dict(LLAMA3_8B, sliding_window=4096), "sliding-window"),
    (dict(LLAMA3_8B, layer_types=["full_attention", "sliding_attention"] * 16), "sliding_attention"),
    (dict(LLAMA3_8B, kv_lora_rank=512), "latent attention"),
    (dict(LLAMA3_8B, num_kv_shared_layers=10), "share another layer"),
    ({"hidden_size": 4096}, "lacks num_hidden_layers"),
])
def test_caches_of_another_shape_are_refused(config, message):
    with pytest.raises(kt.UnsupportedModel, match=message):
        kt.geometry_from_config(config, "bfloat16", 2)


def test_a_sliding_window_that_is_off_is_not_refused():
    g = kt.geometry_from_config(dict(LLAMA3_8B, sliding_window=4096, use_sliding_window=False), "bfloat16", 2)
    assert g.num_layers == 32


def test_model_id_is_required():
    with pytest.raises(ValueError, match="model_id"):
        kt.kv_spec(kt.geometry_from_config(LLAMA3_8B, "bfloat16", 2), "")


def test_usable_prefix_leaves_the_last_token_to_compute():
    assert kt.usable_prefix(3 * CHUNK + 10, CHUNK) == 3 * CHUNK
    assert kt.usable_prefix(3 * CHUNK, CHUNK) == 2 * CHUNK
    assert kt.usable_prefix(3 * CHUNK + 1, CHUNK) == 3 * CHUNK
    assert kt.usable_prefix(0, CHUNK) == 0


TINY = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8)


def buffers(max_tokens, rng=None):
    """[1, kv_heads, max_tokens, head_dim] key and value arrays per layer (2-byte elements)."""
    shape = (1, 2, max_tokens, 8)
    make = (lambda: rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)) if rng else \
        (lambda: np.zeros(shape, dtype=np.uint16))
    return [(make(), make()) for _ in range(TINY["num_hidden_layers"])]


def pooled(client, bufs, model_id="tiny@1"):
    g = kt.geometry_from_config(TINY, "bfloat16", 2)
    return kt.PooledKv(client, g, model_id, bufs, chunk_tokens=CHUNK, layers_per_stage=2,
                       staging_bytes_per_stage=1 << 20)


def test_save_then_restore_into_fresh_buffers(client):
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 50000, size=3 * CHUNK + 10, dtype=np.int32)
    src = buffers(8 * CHUNK, rng)
    saver = pooled(client, src)
    assert saver.spec.stage_layers == [4, 2]
    out = saver.save_tokens(tokens)
    assert out["ok"] and out["objects_put"] == 3 * 2, out  # 3 full chunks x 2 stages; the tail is not saved

    dst = buffers(8 * CHUNK)
    restorer = pooled(client, dst)
    got = restorer.lookup_and_restore(tokens)
    assert (got.end_token, got.restored_tokens, got.status) == (3 * CHUNK, 3 * CHUNK, "OK")
    for (sk, sv), (dk, dv) in zip(src, dst):
        assert np.array_equal(sk[:, :, :3 * CHUNK], dk[:, :, :3 * CHUNK])
        assert np.array_equal(sv[:, :, :3 * CHUNK], dv[:, :, :3 * CHUNK])
        assert not dk[:, :, 3 * CHUNK:].any() and not dv[:, :, 3 * CHUNK:].any()

    # A prompt of exactly 3 chunks restores 2: its last token is computed for the logits.
    assert restorer.lookup_and_restore(tokens[:3 * CHUNK]).end_token == 2 * CHUNK
    # A prompt that diverges inside chunk 2 restores chunks 0 and 1 (a partial hit).
    diverged = tokens.copy()
    diverged[2 * CHUNK + 5] += 1
    assert restorer.lookup_and_restore(diverged).end_token == 2 * CHUNK
    # Beyond what the buffers hold already.
    again = restorer.lookup_and_restore(tokens, cached_tokens=CHUNK)
    assert (again.end_token, again.restored_tokens) == (3 * CHUNK, 2 * CHUNK)
    # Saving again writes nothing new.
    assert saver.save_tokens(tokens)["objects_put"] == 0


def test_another_model_finds_nothing(client):
    rng = np.random.default_rng(8)
    tokens = rng.integers(0, 50000, size=2 * CHUNK + 1, dtype=np.int32)
    assert pooled(client, buffers(4 * CHUNK, rng), "tiny@1").save_tokens(tokens)["ok"]
    other = pooled(client, buffers(4 * CHUNK), "tiny@2")
    got = other.lookup_and_restore(tokens)
    assert (got.end_token, got.restored_tokens) == (0, 0)


def test_asynchronous_saves_finish_before_a_restore_writes(client):
    rng = np.random.default_rng(9)
    tokens = rng.integers(0, 50000, size=4 * CHUNK + 3, dtype=np.int32)
    bufs = buffers(8 * CHUNK, rng)
    kv = pooled(client, bufs)
    assert kv.save_tokens(tokens, wait=False) is None
    got = kv.lookup_and_restore(tokens)  # waits for the save first, then finds all of it
    assert got.end_token == 4 * CHUNK
    assert kv.finish_saves() == []


def test_bad_buffers_and_prompts_are_refused(client):
    g = kt.geometry_from_config(TINY, "bfloat16", 2)
    with pytest.raises(ValueError, match="layers of buffers"):
        kt.PooledKv(client, g, "tiny@1", buffers(4 * CHUNK)[:2], chunk_tokens=CHUNK)
    wrong = [(np.zeros((1, 3, 4 * CHUNK, 8), np.uint16),) * 2] * 3
    with pytest.raises(ValueError, match=r"\[1, 2, max_tokens, 8\]"):
        kt.PooledKv(client, g, "tiny@1", wrong, chunk_tokens=CHUNK)
    kv = pooled(client, buffers(4 * CHUNK))
    with pytest.raises(ValueError, match="do not fit"):
        kv.lookup_and_restore(np.zeros(4 * CHUNK + 1, np.int32))
    with pytest.raises(ValueError, match="do not fit"):
        kv.save_tokens(np.zeros(4 * CHUNK + 1, np.int32))
    with pytest.raises(kvpool.Error, match="INVALID_ARGUMENT"):  # holds more than the prompt has
        kv.lookup_and_restore(np.zeros(10, np.int32), cached_tokens=20)


def test_lower_right_attention_builds_no_mask_unless_the_sequence_is_padded():
    import kvpool_attention
    assert kvpool_attention.no_mask_unless_padded(1, 4, 10) is None
    assert kvpool_attention.no_mask_unless_padded(1, 4, 10, attention_mask=np.ones((1, 10), dtype=bool)) is None
    padded = np.array([[False] + [True] * 9])
    assert kvpool_attention.no_mask_unless_padded(1, 4, 10, attention_mask=padded) is padded  # the attention refuses it


def test_lower_right_attention_refuses_a_model_it_would_compute_wrongly():
    import types
    import kvpool_attention
    model = types.SimpleNamespace(config={"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                                          "sliding_window": 128})
    with pytest.raises(kt.UnsupportedModel, match="sliding-window"):
        kvpool_attention.use_lower_right_causal_attention(model)
