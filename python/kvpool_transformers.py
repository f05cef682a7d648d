"""kvpool for Hugging Face transformers: a model's KV cache saved to and restored from the pool.

A transformers cache keeps, per layer, keys and values as [batch, kv heads, tokens, head dim]
tensors. `PooledKv` allocates those tensors once (batch 1, room for `max_tokens`) and hands the
model a cache (`PooledKv.new_cache()`) whose layers write each forward's keys and values into
them in place, so the pool's connector saves from and restores into the very tensors attention
reads: no copy on the way, and on one host the restore reads the store's mapped segment in place
(the GPU DMAs from it; every object checked against its writer's checksum).

How the model's cache maps onto the connector (src/connector/paged_kv_layout.h): within one KV
head of one layer, a token's key is head_dim contiguous elements and tokens follow each other.
So each (layer, KV head) is one connector layer with two planes, K = keys[0, head] and
V = values[0, head], whose blocks are runs of `chunk_tokens` tokens in order (the block table is
the identity). Connector layers are grouped `layers_per_stage` model layers to a stage object:
the pool stores a chunk of 256 tokens of a Llama-3-8B-shaped model as 4 objects of 8 MiB.

The namespace (which stored KV may be used) hashes the caller's `model_id` (name the weights:
two models that share a shape do not share KV), the dtype, the layer and head counts and this
layout, so a different model, dtype or layout finds nothing rather than wrong bytes. Models
whose cache is not one full-attention tensor pair per layer (sliding windows, shared KV layers,
latent attention) are refused with an error naming what is missing.

Pure parts (geometry_from_config, kv_spec, PooledKv over numpy arrays) need neither torch nor
transformers; PooledKv.for_model and new_cache need both.

    pool = PooledKv.for_model(client, model, model_id="llama-3-8b@main", max_tokens=140_000)
    cache = pool.new_cache()
    got = pool.restore(cache, prompt)            # the longest pooled prefix, whole chunks
    out = model(prompt[:, got.end_token:], past_key_values=cache, use_cache=True)
    pool.save(cache, prompt)                     # the cache's full chunks into the pool
"""
import dataclasses
import itertools
import time
import warnings

import numpy as np

import kvpool

# Attributes of a config that mean a layer's cache is not one full-attention K/V pair.
_UNSUPPORTED_CONFIG = {
    "kv_lora_rank": "latent attention (MLA) caches one compressed vector per token",
    "num_kv_shared_layers": "some layers share another layer's KV",
}


class UnsupportedModel(ValueError):
    """The model's cache does not have the shape this integration saves and restores."""


@dataclasses.dataclass(frozen=True)
class KvGeometry:
    """What a model's cache looks like: per layer, keys and values of [1, kv_heads, tokens, head_dim]."""
    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: str      # e.g. "bfloat16"
    itemsize: int   # bytes per element

    @property
    def bytes_per_token(self):
        """K and V of one token across every layer: what a pool stores per token."""
        return 2 * self.num_layers * self.kv_heads * self.head_dim * self.itemsize


def _get(config, name, default=None):
    if isinstance(config, dict):
        return config.get(name, default)
    return getattr(config, name, default)


def geometry_from_config(config, dtype, itemsize):
    """The cache geometry of a transformers text-model config (an object or a dict).

    Raises UnsupportedModel when the model's layers do not all keep plain full-attention K/V."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    for attr, why in _UNSUPPORTED_CONFIG.items():
        if _get(config, attr):
            raise UnsupportedModel(f"unsupported model: {why} ({attr}={_get(config, attr)})")
    layer_types = _get(config, "layer_types")
    if layer_types and any(t != "full_attention" for t in layer_types):
        kinds = sorted(set(layer_types) - {"full_attention"})
        raise UnsupportedModel(f"unsupported model: layers of type {kinds} keep a window, not the whole sequence")
    if not layer_types and _get(config, "sliding_window") and _get(config, "use_sliding_window", True):
        raise UnsupportedModel(f"unsupported model: sliding-window attention (sliding_window={_get(config, 'sliding_window')})")
    layers, heads = _get(config, "num_hidden_layers"), _get(config, "num_attention_heads")
    hidden = _get(config, "hidden_size")
    if not layers or not heads or not hidden:
        raise UnsupportedModel("config lacks num_hidden_layers, num_attention_heads or hidden_size")
    kv_heads = _get(config, "num_key_value_heads") or heads
    head_dim = _get(config, "head_dim") or hidden // heads
    return KvGeometry(num_layers=int(layers), kv_heads=int(kv_heads), head_dim=int(head_dim), dtype=str(dtype),
                      itemsize=int(itemsize))


def stage_layers(geometry, layers_per_stage):
    """Connector layers (one per model layer and KV head) per stage object, in stage order."""
    if layers_per_stage < 1:
        raise ValueError(f"layers_per_stage must be at least 1, got {layers_per_stage}")
    return [geometry.kv_heads * min(layers_per_stage, geometry.num_layers - first)
            for first in range(0, geometry.num_layers, layers_per_stage)]


def kv_spec(geometry, model_id, chunk_tokens=256, layers_per_stage=8):
    """The connector's KvModelSpec of this geometry and layout (blocks of a whole chunk)."""
    if not model_id:
        raise ValueError("model_id must name the weights (e.g. 'meta-llama/Meta-Llama-3-8B@<revision>')")
    return kvpool.KvModelSpec(model_id=f"{model_id}|transformers:head-planes", kv_dtype=geometry.dtype,
                              layout="split_kv", bytes_per_token_per_layer=2 * geometry.head_dim * geometry.itemsize,
                              stage_layers=stage_layers(geometry, layers_per_stage), block_tokens=chunk_tokens,
                              chunk_tokens=chunk_tokens)


def usable_prefix(num_tokens, chunk_tokens):
    """Tokens of a prompt a restore may cover: whole chunks, leaving at least its last token to
    compute (the model's next-token logits come from it)."""
    return max(num_tokens - 1, 0) // chunk_tokens * chunk_tokens


@dataclasses.dataclass
class Restored:
    """What one restore brought back."""
    end_token: int        # the cache holds the prompt's tokens [0, end_token)
    restored_tokens: int  # of them, brought back from the pool by this restore
    planned_tokens: int   # what the lookup promised; more than restored_tokens = fell back
    status: str           # "OK", or why fewer tokens came back (they are computed instead)
    lookup_s: float       # the lookup's round trip
    restore_s: float      # from the lookup's answer to the tokens being in the cache


class PooledKv:
    """One sequence's KV, in per-layer (keys, values) buffers of [1, kv_heads, max_tokens, head_dim],
    saved to and restored from a kvpool pool through the connector.

    The buffers are numpy arrays (host memory, the CPU packer: tests) or CUDA torch tensors (the
    GPU packer); every one C-contiguous. Not thread-safe: one sequence, one caller."""

    _request_ids = itertools.count(1)

    def __init__(self, client, geometry, model_id, buffers, chunk_tokens=256, layers_per_stage=8,
                 restore_timeout_ms=30000, staging_bytes_per_stage=64 << 20):
        if len(buffers) != geometry.num_layers:
            raise ValueError(f"{len(buffers)} layers of buffers for a model of {geometry.num_layers} layers")
        shape = tuple(buffers[0][0].shape)
        if len(shape) != 4 or shape[0] != 1 or shape[1] != geometry.kv_heads or shape[3] != geometry.head_dim:
            raise ValueError(f"buffers must be [1, {geometry.kv_heads}, max_tokens, {geometry.head_dim}], got {list(shape)}")
        for keys, values in buffers:
            if tuple(keys.shape) != shape or tuple(values.shape) != shape:
                raise ValueError(f"every buffer must be {list(shape)}")
        self.geometry = geometry
        self.model_id = model_id
        self.spec = kv_spec(geometry, model_id, chunk_tokens, layers_per_stage)
        self.chunk_tokens = chunk_tokens
        self.max_tokens = shape[2]
        self.buffers = buffers
        per_stage = self.spec.stage_layers
        stages, layer = [], 0
        for stage, connector_layers in enumerate(per_stage):
            planes = []
            for _ in range(connector_layers // geometry.kv_heads):
                keys, values = buffers[layer]
                for head in range(geometry.kv_heads):
                    planes += [keys[0, head], values[0, head]]
                layer += 1
            stages.append(kvpool.PagedKvCache(self.spec, stage, planes))
        self._tables = [np.arange(self.max_tokens // chunk_tokens, dtype=np.int32)] * len(per_stage)  # identity
        self.connector = kvpool.Connector(client, self.spec, stages, restore_timeout_ms=restore_timeout_ms,
                                          staging_bytes_per_stage=staging_bytes_per_stage)
        self._pending_saves = []
        self._cache = None  # the cache new_cache last made

    @classmethod
    def for_model(cls, client, model, model_id, max_tokens, **options):
        """Buffers for `model` (its dtype and device) holding up to max_tokens tokens (rounded up to
        whole chunks)."""
        import torch
        param = next(model.parameters())
        devices = {p.device for p in model.parameters()}
        if len(devices) > 1:
            raise UnsupportedModel(f"the model is spread over {sorted(map(str, devices))}: PooledKv keeps one device's cache")
        chunk = options.get("chunk_tokens", 256)
        geometry = geometry_from_config(model.config, str(param.dtype).removeprefix("torch."), param.element_size())
        max_tokens = -(-max_tokens // chunk) * chunk
        shape = (1, geometry.kv_heads, max_tokens, geometry.head_dim)
        buffers = [(torch.zeros(shape, dtype=param.dtype, device=param.device),
                    torch.zeros(shape, dtype=param.dtype, device=param.device)) for _ in range(geometry.num_layers)]
        return cls(client, geometry, model_id, buffers, **options)

    def new_cache(self):
        """A transformers cache over this pool's buffers, empty. Only one lives at a time: a new
        one empties the buffers' previous cache."""
        cache_class, layer_class = _cache_classes()
        if self._cache is not None:
            self._cache.set_length(0)
        self.finish_saves()
        self._cache = cache_class(self, [layer_class(keys, values) for keys, values in self.buffers])
        return self._cache

    def lookup_and_restore(self, tokens, cached_tokens=0):
        """Restores the longest pooled run of `tokens` beyond the first `cached_tokens` (already in
        the buffers) into the buffers; returns a Restored. The last token is never restored."""
        self.finish_saves()  # a save in flight reads the buffers this would write
        tokens = self._fitting(tokens)
        usable = usable_prefix(len(tokens), self.chunk_tokens)
        t0 = time.perf_counter()
        hit = self.connector.lookup(tokens[:max(usable, cached_tokens)], gpu_cached_tokens=cached_tokens)
        t1 = time.perf_counter()
        request = next(self._request_ids)
        self.connector.start_restore(request, hit, self._tables)
        done = _outcome(self.connector.wait_restore, request)
        t2 = time.perf_counter()
        return Restored(end_token=done["end_token"], restored_tokens=done["restored_tokens"],
                        planned_tokens=done["planned_tokens"], status=done["status"], lookup_s=t1 - t0,
                        restore_s=t2 - t1)

    def restore(self, cache, input_ids):
        """Empties `cache` and fills it with the longest pooled prefix of input_ids (a [1, n] tensor
        or a sequence of ints) in whole chunks; the model computes input_ids[:, end_token:] next."""
        if getattr(cache, "pool", None) is not self:
            raise ValueError("restore into a cache this PooledKv made (new_cache): it writes this PooledKv's buffers")
        cache.set_length(0)
        got = self.lookup_and_restore(_token_array(input_ids))
        cache.set_length(got.end_token)
        return got

    def save(self, cache, input_ids, wait=True):
        """Saves the full chunks of input_ids whose KV `cache` holds (its first get_seq_length()
        tokens) into the pool: save_tokens of those tokens."""
        tokens = _token_array(input_ids)
        held = cache.get_seq_length()
        if held > len(tokens):
            raise ValueError(f"the cache holds {held} tokens, input_ids only {len(tokens)}")
        return self.save_tokens(tokens[:held], wait)

    def save_tokens(self, tokens, wait=True):
        """Saves the full chunks of `tokens`, whose KV the buffers hold at [0, len(tokens)), into the
        pool; chunks the pool has are skipped. With wait=False it returns at once: the buffers may
        grow meanwhile, and crop, restore and new_cache wait for the save first. Returns the save's
        outcome (a dict; None when not waited for); a full save queue drops the save (the pool is
        a cache) and its outcome says so."""
        tokens = self._fitting(tokens)
        _synchronize(self.buffers)  # the forward that wrote them has finished on the GPU
        request = next(self._request_ids)
        if not self.connector.save(request, tokens, self._tables):
            return {"request_id": request, "ok": False, "status": "UNAVAILABLE: save queue full, dropped"}
        self._pending_saves.append(request)
        return self.finish_saves()[-1] if wait else None

    def finish_saves(self):
        """Waits for every save in flight; returns their outcomes in order."""
        done = [_outcome(self.connector.wait_save, r) for r in self._pending_saves]
        self._pending_saves = []
        return done

    def metrics(self):
        return self.connector.metrics()

    def _fitting(self, tokens):
        """`tokens` as the connector takes them; ValueError when the buffers cannot hold them."""
        tokens = _token_array(tokens)
        if len(tokens) > self.max_tokens:
            raise ValueError(f"{len(tokens)} tokens do not fit a cache of {self.max_tokens}")
        return tokens


def _token_array(input_ids):
    if hasattr(input_ids, "detach"):
        if input_ids.dim() == 2 and input_ids.shape[0] != 1:
            raise ValueError(f"batch size 1 only, got input_ids of shape {list(input_ids.shape)}")
        input_ids = input_ids.detach().reshape(-1).cpu().numpy()
    return np.ascontiguousarray(input_ids, dtype=np.int32).reshape(-1)


def _outcome(wait, request):
    """The final outcome of `request` from the connector's wait_restore or wait_save. A wait
    gives up at its timeout with a NOT_READY outcome while the request still writes or reads the
    buffers, which stay lent to it until it answers: so this waits again, warning each time."""
    while True:
        done = wait(request)
        if not done["status"].startswith("NOT_READY"):
            return done
        warnings.warn(f"kvpool: request {request} is still running: {done['status']}", RuntimeWarning)


def _synchronize(buffers):
    keys = buffers[0][0]
    if getattr(keys, "is_cuda", False):
        import torch
        torch.cuda.synchronize(keys.device)


_CLASSES = None


def _cache_classes():
    """PooledCache and PooledLayer, defined on first use (they subclass transformers' classes)."""
    global _CLASSES
    if _CLASSES is None:
        from transformers.cache_utils import Cache, DynamicLayer

        class PooledLayer(DynamicLayer):
            """One layer's keys and values, written in place into the pool's buffers; keys and
            values are views of the first get_seq_length() tokens."""

            def __init__(self, keys, values):
                super().__init__()
                self._buffers = (keys, values)
                self.dtype, self.device = keys.dtype, keys.device
                self.is_initialized = True
                self.set_length(0)

            def set_length(self, length):
                self.length = length
                self.keys = self._buffers[0][:, :, :length]
                self.values = self._buffers[1][:, :, :length]

            def lazy_initialization(self, key_states, *args, **kwargs):
                pass  # the buffers exist from the start

            def update(self, key_states, value_states, cache_kwargs=None):
                end = self.length + key_states.shape[-2]
                capacity = self._buffers[0].shape[2]
                if key_states.shape[0] != 1:
                    raise ValueError(f"PooledKv caches hold batch size 1, got {key_states.shape[0]}")
                if end > capacity:
                    raise ValueError(f"the cache holds at most {capacity} tokens, this forward needs {end}")
                self._buffers[0][:, :, self.length:end].copy_(key_states)
                self._buffers[1][:, :, self.length:end].copy_(value_states)
                self.set_length(end)
                return self.keys, self.values

            def get_seq_length(self):
                return self.length

            def crop(self, max_length):
                if max_length < 0:
                    max_length = self.length + max_length
                self.set_length(max(0, min(self.length, max_length)))

            def _batch_1_only(self, *args, **kwargs):
                raise NotImplementedError("PooledKv caches hold one sequence (batch size 1)")

            batch_repeat_interleave = batch_select_indices = reorder_cache = _batch_1_only

        class PooledCache(Cache):
            """A transformers cache over a PooledKv's buffers (see PooledKv.new_cache)."""

            def __init__(self, owner, layers):
                super().__init__(layers=layers)
                self.pool = owner

            def set_length(self, length):
                self.pool.finish_saves()  # a save in flight may be reading what would be rewritten
                for layer in self.layers:
                    layer.set_length(length)

            def crop(self, max_length):
                self.pool.finish_saves()
                super().crop(max_length)

        _CLASSES = (PooledCache, PooledLayer)
    return _CLASSES
