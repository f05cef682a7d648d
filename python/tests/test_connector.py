import urllib.request

import numpy as np
import pytest

import kvpool

CHUNK = 64
BLOCK = 16


def spec(layout="latent", bytes_per_token=576, stages=(2, 1)):
    return kvpool.KvModelSpec(model_id="py-test", kv_dtype="fp8", layout=layout,
                              bytes_per_token_per_layer=bytes_per_token, stage_layers=list(stages),
                              block_tokens=BLOCK, chunk_tokens=CHUNK)


def planes_per_layer(layout):
    return 1 if layout == "latent" else 2


def make_stage_caches(s, layout, num_blocks, rng):
    """One numpy array per plane, shaped [num_blocks, BLOCK, plane_token_bytes]."""
    ppl = planes_per_layer(layout)
    caches, arrays = [], []
    for stage, layers in enumerate(s.stage_layers):
        planes = [rng.integers(0, 256, size=(num_blocks, BLOCK, s.bytes_per_token_per_layer // ppl), dtype=np.uint8)
                  for _ in range(layers * ppl)]
        arrays.append(planes)
        caches.append(kvpool.PagedKvCache(s, stage, planes))
    return caches, arrays


def new_spec(layout):
    return spec(layout=layout, bytes_per_token=576 if layout == "latent" else 512)


def token_bytes(arrays, stage, table, token):
    blk, off = table[token // BLOCK], token % BLOCK
    return b"".join(p[blk, off].tobytes() for p in arrays[stage])


def test_chunk_keys_chain_and_skip_the_tail():
    s = spec()
    tokens = np.arange(CHUNK * 3 + 10, dtype=np.int32)
    keys = kvpool.chunk_keys(s, tokens)
    assert len(keys) == 3 and all(len(k) == 32 for k in keys)
    changed = tokens.copy()
    changed[CHUNK + 1] += 1
    keys2 = kvpool.chunk_keys(s, changed)
    assert keys2[0] == keys[0] and keys2[1] != keys[1] and keys2[2] != keys[2]
    assert spec(stages=(1, 2)).namespace != s.namespace
    assert kvpool.stage_object_key(s, keys[0], 1) == f"{s.namespace}/{keys[0]}/s1"


def test_bad_spec_is_refused():
    with pytest.raises(kvpool.Error, match="INVALID_ARGUMENT"):
        kvpool.KvModelSpec(model_id="m", kv_dtype="fp8", layout="latent", bytes_per_token_per_layer=576,
                           stage_layers=[2], block_tokens=16, chunk_tokens=100)
    with pytest.raises(kvpool.Error):
        kvpool.KvModelSpec(model_id="m", kv_dtype="fp8", layout="paged?", bytes_per_token_per_layer=576,
                           stage_layers=[2])


@pytest.mark.parametrize("layout", ["latent", "split_kv"])
def test_cpu_packer_round_trip(layout):
    s = new_spec(layout)
    rng = np.random.default_rng(1)
    src, src_arrays = make_stage_caches(s, layout, 32, rng)
    dst, dst_arrays = make_stage_caches(s, layout, 32, rng)
    src_table = rng.permutation(32)[:8].astype(np.int32)
    dst_table = rng.permutation(32)[:8].astype(np.int32)
    packer = kvpool.ChunkPacker()
    assert packer.name == "cpu"
    staging = np.zeros(2 * src[0].packed_chunk_bytes(CHUNK), dtype=np.uint8)
    packer.pack(src[0], src_table, CHUNK, 0, 2, staging)
    packer.unpack(dst[0], dst_table, CHUNK, 0, 2, staging)
    for t in range(2 * CHUNK):
        assert token_bytes(src_arrays, 0, src_table, t) == token_bytes(dst_arrays, 0, dst_table, t)


def test_cuda_packer_unavailable_without_gpu():
    if kvpool.cuda_device_count() > 0:
        pytest.skip("GPU present: tests/gpu covers the CUDA packer")
    with pytest.raises(kvpool.Error, match="UNAVAILABLE"):
        kvpool.ChunkPacker(0)


@pytest.mark.parametrize("layout", ["latent", "split_kv"])
def test_save_then_restore_into_a_fresh_cache(client, layout):
    s = new_spec(layout)
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 50000, size=CHUNK * 5 + 7, dtype=np.int32)
    tokens[0] = {"latent": 1, "split_kv": 2}[layout]  # distinct prompts per layout
    blocks = (len(tokens) + BLOCK - 1) // BLOCK
    src, src_arrays = make_stage_caches(s, layout, 64, rng)
    src_tables = [rng.permutation(64)[:blocks].astype(np.int32) for _ in s.stage_layers]
    saver = kvpool.Connector(client, s, src, staging_bytes_per_stage=4 << 20)
    assert saver.save(1, tokens, src_tables)
    out = saver.wait_save(1)
    assert out["ok"], out
    assert out["objects_put"] == 5 * len(s.stage_layers)

    dst, dst_arrays = make_stage_caches(s, layout, 64, rng)
    dst_tables = [rng.permutation(64)[:blocks].astype(np.int32) for _ in s.stage_layers]
    conn = kvpool.Connector(client, s, dst, staging_bytes_per_stage=4 << 20)
    hit = conn.lookup(tokens, gpu_cached_tokens=0)
    assert hit.hit_chunks == 5 and hit.restorable_tokens == 5 * CHUNK
    conn.start_restore(7, hit, dst_tables)
    done = conn.wait_restore(7)
    assert done["ok"] and not done["fell_back"] and done["end_token"] == 5 * CHUNK, done
    for stage in range(len(s.stage_layers)):
        for t in range(5 * CHUNK):
            assert token_bytes(src_arrays, stage, src_tables[stage], t) == \
                token_bytes(dst_arrays, stage, dst_tables[stage], t)
    m = conn.metrics()
    assert m["kvpool_connector_restore_tokens"] == 5 * CHUNK
    assert m["kvpool_connector_lookups"] == 1
    # The process's /metrics: this connector's histograms (each stage timed once) and the
    # client's transfer request sizes, over real HTTP.
    with kvpool.MetricsServer("127.0.0.1:0", connectors=[conn], clients=[client]) as server:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=30).read().decode()
        health = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=30).read().decode()
    assert health == "ok\n"
    for stage in range(len(s.stage_layers)):
        assert f'kvpool_connector_restore_stage_seconds_count{{stage="{stage}"}} 1\n' in text, text
    assert "kvpool_connector_lookup_seconds_count 1\n" in text
    assert 'kvpool_transfer_request_bytes_count{op="write"} ' in text
    assert text == kvpool.metrics_text(connectors=[conn], clients=[client])
    with pytest.raises(kvpool.Error, match="INVALID_ARGUMENT"):
        kvpool.MetricsServer("no port here", connectors=[conn])

    # Saving the same prompt again writes nothing.
    assert saver.save(2, tokens, src_tables)
    again = saver.wait_save(2)
    assert again["objects_put"] == 0 and again["objects_skipped"] == 5 * len(s.stage_layers)


def test_nothing_cached_restores_nothing(client):
    s = new_spec("latent")
    caches, _ = make_stage_caches(s, "latent", 16, np.random.default_rng(3))
    conn = kvpool.Connector(client, s, caches)
    tokens = np.full(CHUNK * 2, 424242, dtype=np.int32)
    hit = conn.lookup(tokens)
    assert hit.hit_chunks == 0 and hit.restorable_tokens == 0
    conn.start_restore(1, hit, [np.arange(8, dtype=np.int32)] * 2)
    assert conn.wait_restore(1)["restored_tokens"] == 0
    assert conn.poll_restore(1)["status"].startswith("NOT_FOUND")
