"""kvpool_transformers on a GPU: a small random-weight transformers Llama prefills a prompt into a
PooledKv cache, saves it into the pool (the module's in-process pool: master + storage service),
and a second PooledKv restores it on the GPU through the connector's CUDA unpack. The restored
cache is bitwise equal to the saved one, the model continues from it to the same logits as from
the original (under deterministic algorithms) and `generate` gives the same tokens; another
dtype or model finds nothing.

Needs torch with CUDA, transformers, and the kvpool module built with -DKVPOOL_CUDA=ON
(scripts/gpu-check.sh runs it with python/ on PYTHONPATH)."""
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts: deterministic GEMMs

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
kvpool = pytest.importorskip("kvpool")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if kvpool.cuda_device_count() == 0:
    pytest.skip("kvpool built without KVPOOL_CUDA", allow_module_level=True)
import kvpool_transformers as kt  # noqa: E402

CHUNK = 64
CONFIG = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=1000, max_position_embeddings=4096)


@pytest.fixture(scope="module", autouse=True)
def deterministic():
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def make_model(dtype=torch.bfloat16):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**CONFIG, attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(config).to("cuda", dtype).eval()


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def client():
    with kvpool.LocalPool(memory_bytes=256 << 20) as pool:
        yield kvpool.Client(pool.address)


def pooled(client, model, model_id="tiny-llama@seed0"):
    return kt.PooledKv.for_model(client, model, model_id, max_tokens=1024, chunk_tokens=CHUNK, layers_per_stage=2,
                                 staging_bytes_per_stage=4 << 20)


def prompt(n, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, CONFIG["vocab_size"], (1, n), generator=g).cuda()


@torch.no_grad()
def last_logits(model, ids, cache):
    return model(ids, past_key_values=cache, use_cache=True).logits[0, -1].float()


@torch.no_grad()
def test_a_restored_cache_is_the_saved_one_and_continues_alike(client, model):
    ids = prompt(3 * CHUNK + 37, 1)
    original = pooled(client, model)
    cache = original.new_cache()
    last_logits(model, ids, cache)
    assert cache.get_seq_length() == ids.shape[1]
    saved = original.save(cache, ids)
    assert saved["ok"] and saved["objects_put"] == 3 * 2, saved  # 3 full chunks x 2 stage objects

    restorer = pooled(client, model)
    restored = restorer.new_cache()
    got = restorer.restore(restored, ids)
    assert (got.end_token, got.restored_tokens, got.status) == (3 * CHUNK, 3 * CHUNK, "OK"), got
    assert restored.get_seq_length() == 3 * CHUNK
    for (ok, ov), (rk, rv) in zip(original.buffers, restorer.buffers):
        assert torch.equal(ok[:, :, :3 * CHUNK], rk[:, :, :3 * CHUNK])
        assert torch.equal(ov[:, :, :3 * CHUNK], rv[:, :, :3 * CHUNK])

    # The same 37 tokens on each: the original cropped to the restored length, and the restored.
    cache.crop(3 * CHUNK)
    tail = ids[:, 3 * CHUNK:]
    assert torch.equal(last_logits(model, tail, cache), last_logits(model, tail, restored))


@torch.no_grad()
def test_generate_continues_a_restored_cache(client, model):
    ids = prompt(2 * CHUNK + 20, 2)
    original = pooled(client, model)
    cache = original.new_cache()
    last_logits(model, ids, cache)
    assert original.save(cache, ids)["ok"]
    cache.crop(2 * CHUNK)
    expected = model.generate(ids, past_key_values=cache, max_new_tokens=16, do_sample=False)

    restorer = pooled(client, model)
    restored = restorer.new_cache()
    assert restorer.restore(restored, ids).end_token == 2 * CHUNK
    got = model.generate(ids, past_key_values=restored, max_new_tokens=16, do_sample=False)
    assert torch.equal(got, expected)
    assert restored.get_seq_length() == ids.shape[1] + 15  # the last generated token is not cached yet


@torch.no_grad()
def test_another_dtype_or_model_restores_nothing(client, model):
    ids = prompt(2 * CHUNK + 5, 3)
    saver = pooled(client, model)
    cache = saver.new_cache()
    last_logits(model, ids, cache)
    assert saver.save(cache, ids)["ok"]
    same = pooled(client, model)
    assert same.restore(same.new_cache(), ids).end_token == 2 * CHUNK
    with pytest.raises(ValueError, match="cache this PooledKv made"):
        same.restore(cache, ids)
    half = make_model(torch.float16)
    other = pooled(client, half)
    assert other.restore(other.new_cache(), ids).end_token == 0
    renamed = pooled(client, model, "tiny-llama@seed1")
    assert renamed.restore(renamed.new_cache(), ids).end_token == 0


def test_a_cache_refuses_to_outgrow_its_buffers(client, model):
    kv = pooled(client, model)
    cache = kv.new_cache()
    with pytest.raises(ValueError, match="at most 1024 tokens"):
        with torch.no_grad():
            model(prompt(1025, 4), past_key_values=cache, use_cache=True)


@torch.no_grad()
def test_lower_right_attention_continues_a_restored_cache_like_sdpa(client):
    import kvpool_attention

    ids, turn = prompt(4 * CHUNK, 7), prompt(CHUNK + 9, 8)
    reference = make_model()
    expected = last_logits(reference, torch.cat([ids, turn], dim=1), None)
    lower_right = kvpool_attention.use_lower_right_causal_attention(make_model())
    assert lower_right.config._attn_implementation == kvpool_attention.ATTENTION_NAME
    saver = pooled(client, lower_right, "tiny-llama@lower-right")
    cache = saver.new_cache()
    last_logits(lower_right, ids, cache)
    assert saver.save(cache, ids)["ok"]

    restorer = pooled(client, lower_right, "tiny-llama@lower-right")
    restored = restorer.new_cache()
    assert restorer.restore(restored, ids).end_token == 3 * CHUNK  # the last token is left to compute
    got = last_logits(lower_right, torch.cat([ids, turn], dim=1)[:, 3 * CHUNK:], restored)
    # Another kernel than the reference's: close, not bitwise.
    assert torch.allclose(got, expected, atol=0.1, rtol=0), float((got - expected).abs().max())
    assert int(torch.argmax(got)) == int(torch.argmax(expected))
    with pytest.raises(ValueError, match="padding"):
        lower_right(turn, attention_mask=torch.tensor([[0] + [1] * (turn.shape[1] - 1)], device="cuda"))
