"""End-to-end GPU proof: a small random-weight transformer over a paged KV cache prefills a
prompt, saves its KV through kvpool (the module's in-process pool: master + storage service),
a fresh cache restores it on the GPU, and the next token's logits are bitwise equal to the
ones computed from the original prefill. Runs for GQA (K/V split planes) and MLA-like (one
576-byte latent plane per token per layer) attention, with PP=1 and PP=2 stage objects.

Needs torch with CUDA and the kvpool module built with -DKVPOOL_CUDA=ON (scripts/gpu-check.sh)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
kvpool = pytest.importorskip("kvpool")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if kvpool.cuda_device_count() == 0:
    pytest.skip("kvpool built without KVPOOL_CUDA", allow_module_level=True)

BLOCK, CHUNK, LAYERS, D, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 16, 256, 4, 256, 8, 2, 32, 1000
MLA_LATENT = 288  # fp16 -> 576 B per token per layer
DEV = torch.device("cuda:0")
DTYPE = torch.float16


class TinyTransformer:
    def __init__(self, attention, seed=0):
        g = torch.Generator(device="cpu").manual_seed(seed)
        r = lambda *s: (torch.randn(*s, generator=g) * 0.05).to(DEV, DTYPE)
        self.attention = attention
        self.embed, self.pos = r(VOCAB, D), r(4096, D)
        self.layers = []
        for _ in range(LAYERS):
            l = {"wq": r(D, HEADS * HEAD_DIM), "wo": r(HEADS * HEAD_DIM, D), "w1": r(D, 2 * D), "w2": r(2 * D, D)}
            if attention == "gqa":
                l["wk"], l["wv"] = r(D, KV_HEADS * HEAD_DIM), r(D, KV_HEADS * HEAD_DIM)
            else:  # MLA-like: cache one latent per token, expand to K and V at attention time
                l["wdkv"] = r(D, MLA_LATENT)
                l["wuk"], l["wuv"] = r(MLA_LATENT, KV_HEADS * HEAD_DIM), r(MLA_LATENT, KV_HEADS * HEAD_DIM)
            self.layers.append(l)
        self.head = r(D, VOCAB)

    def planes_per_layer(self):
        return 2 if self.attention == "gqa" else 1

    def plane_width(self):
        return KV_HEADS * HEAD_DIM if self.attention == "gqa" else MLA_LATENT

    def new_cache(self, num_blocks):
        """Per layer, its planes: [num_blocks, BLOCK, width] fp16 tensors."""
        return [[torch.zeros(num_blocks, BLOCK, self.plane_width(), device=DEV, dtype=DTYPE)
                 for _ in range(self.planes_per_layer())] for _ in range(LAYERS)]

    @torch.no_grad()
    def forward(self, tokens, start, cache, table):
        """Runs tokens at positions [start, start+len) against cache positions [0, start), writes
        their KV into the cache, returns the last position's logits."""
        n = len(tokens)
        pos = torch.arange(start, start + n, device=DEV)
        x = self.embed[torch.as_tensor(tokens, device=DEV)] + self.pos[pos]
        blk, off = table[pos // BLOCK], pos % BLOCK
        all_pos = torch.arange(0, start + n, device=DEV)
        all_blk, all_off = table[all_pos // BLOCK], all_pos % BLOCK
        for li, l in enumerate(self.layers):
            planes = cache[li]
            if self.attention == "gqa":
                planes[0][blk, off] = x @ l["wk"]
                planes[1][blk, off] = x @ l["wv"]
                k, v = planes[0][all_blk, all_off], planes[1][all_blk, all_off]
            else:
                planes[0][blk, off] = x @ l["wdkv"]
                c = planes[0][all_blk, all_off]
                k, v = c @ l["wuk"], c @ l["wuv"]
            q = (x @ l["wq"]).view(n, HEADS, HEAD_DIM).transpose(0, 1)
            k = k.view(-1, KV_HEADS, HEAD_DIM).transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, 0)
            v = v.view(-1, KV_HEADS, HEAD_DIM).transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, 0)
            scores = (q.float() @ k.float().transpose(1, 2)) / HEAD_DIM ** 0.5
            mask = all_pos[None, :] > pos[:, None]
            scores = scores.masked_fill(mask, float("-inf")).softmax(-1)
            attn = (scores @ v.float()).to(DTYPE).transpose(0, 1).reshape(n, HEADS * HEAD_DIM)
            x = x + attn @ l["wo"]
            x = x + torch.relu(x @ l["w1"]) @ l["w2"]
        return (x[-1:] @ self.head).float()


@pytest.fixture(scope="module")
def pool():
    with kvpool.LocalPool(memory_bytes=1 << 30) as p:
        yield p


@pytest.mark.parametrize("attention", ["gqa", "mla"])
@pytest.mark.parametrize("stage_layers", [[4], [2, 2]], ids=["pp1", "pp2"])
def test_restored_kv_gives_the_same_logits(pool, attention, stage_layers):
    client = kvpool.Client(pool.address)
    model = TinyTransformer(attention)
    bytes_per_token = model.planes_per_layer() * model.plane_width() * 2
    spec = kvpool.KvModelSpec(model_id=f"tiny-{attention}", kv_dtype="fp16",
                              layout="split_kv" if attention == "gqa" else "latent",
                              bytes_per_token_per_layer=bytes_per_token, stage_layers=stage_layers,
                              block_tokens=BLOCK, chunk_tokens=CHUNK)
    chunks = 5
    rng = np.random.default_rng(len(stage_layers))
    prompt = rng.integers(0, VOCAB, size=chunks * CHUNK + 1).astype(np.int32)  # full chunks + the next token
    blocks = (len(prompt) + BLOCK - 1) // BLOCK
    num_blocks = 2 * blocks

    def stage_caches(cache):
        out, first = [], 0
        for s, n in enumerate(stage_layers):
            planes = [p for layer in cache[first:first + n] for p in layer]
            out.append(kvpool.PagedKvCache(spec, s, planes))
            first += n
        return out

    # Engine A: prefill the full chunks, then the next token from its cache.
    cache_a = model.new_cache(num_blocks)
    table_a = torch.randperm(num_blocks, device=DEV)[:blocks].int()
    model.forward(prompt[:-1], 0, cache_a, table_a)
    torch.cuda.synchronize()  # the save reads the KV the forward pass wrote
    logits_a = model.forward(prompt[-1:], len(prompt) - 1, cache_a, table_a)
    conn_a = kvpool.Connector(client, spec, stage_caches(cache_a), staging_bytes_per_stage=64 << 20)
    tables_a = [table_a.cpu().numpy()] * len(stage_layers)
    assert conn_a.save(1, prompt, tables_a)
    saved = conn_a.wait_save(1)
    assert saved["ok"] and saved["objects_put"] == chunks * len(stage_layers), saved

    # Engine B: empty cache, other block ids; restore from the pool, then the next token.
    cache_b = model.new_cache(num_blocks)
    table_b = torch.randperm(num_blocks, device=DEV)[:blocks].int()
    conn_b = kvpool.Connector(client, spec, stage_caches(cache_b), staging_bytes_per_stage=64 << 20)
    hit = conn_b.lookup(prompt, gpu_cached_tokens=0)
    assert hit.hit_chunks == chunks
    conn_b.start_restore(2, hit, [table_b.cpu().numpy()] * len(stage_layers))
    done = conn_b.wait_restore(2)
    assert done["ok"] and not done["fell_back"] and done["end_token"] == chunks * CHUNK, done
    logits_b = model.forward(prompt[-1:], len(prompt) - 1, cache_b, table_b)

    assert torch.equal(logits_a, logits_b), (logits_a - logits_b).abs().max()
    # And a one-shot prefill of the whole prompt agrees to fp16 rounding (different GEMM shapes).
    cache_c = model.new_cache(num_blocks)
    logits_c = model.forward(prompt, 0, cache_c, table_a)
    assert torch.allclose(logits_a, logits_c, atol=2e-2, rtol=2e-2)
    assert int(logits_a.argmax()) == int(logits_b.argmax())
