"""Causal attention for a forward that continues a cache, on PyTorch's flash kernel.

Why: transformers builds an explicit [q, kv] mask for every forward that has a cache and more
than one new token, and PyTorch's scaled_dot_product_attention with an explicit mask never runs
its flash kernel. A turn that restores a long history and computes the rest (what a pool's hit
looks like) then pays a slower kernel on exactly the segment the pool leaves to compute: on an
H100, 19K new tokens on a 72K-token cache took as long as computing all 91K from nothing.

The mask such a forward needs is the lower-right causal one (new token i sees the whole cache and
the new tokens up to i), which PyTorch runs on its flash kernel when given as
torch.nn.attention.bias.causal_lower_right. `use_lower_right_causal_attention(model)` registers
that attention (and a mask function that builds no mask) with transformers under
ATTENTION_NAME and switches the model to it. It serves what PooledKv serves: one unpadded
sequence of a full-attention model; a padding mask is refused, not ignored.

Needs torch and transformers (imported on first use).
"""
import kvpool_transformers

ATTENTION_NAME = "kvpool_lower_right_sdpa"


def lower_right_causal_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """A transformers attention function: query [batch, heads, q, dim], key and value
    [batch, kv heads, kv, dim] with the cache's tokens first; returns ([batch, q, heads, dim], None)."""
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    if attention_mask is not None:
        raise ValueError("kvpool's lower-right attention serves one unpadded sequence; this forward has a padding mask")
    if kwargs.get("sliding_window"):
        raise ValueError("kvpool's lower-right attention is full causal attention; this layer has a sliding window")
    q_len, kv_len = query.shape[-2], key.shape[-2]
    common = dict(dropout_p=dropout if module.training else 0.0, scale=scaling,
                  enable_gqa=query.shape[1] != key.shape[1])
    if q_len == kv_len:  # no cache: the usual causal mask
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, **common)
    elif q_len == 1:  # one new token sees everything
        out = F.scaled_dot_product_attention(query, key, value, **common)
    else:
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=causal_lower_right(q_len, kv_len), **common)
    return out.transpose(1, 2).contiguous(), None


def no_mask_unless_padded(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                          attention_mask=None, **kwargs):
    """The mask function paired with the attention above: no mask for an unpadded sequence (the
    attention knows its causal shape); the 2D padding mask otherwise, which the attention refuses."""
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return attention_mask


def use_lower_right_causal_attention(model):
    """Switches `model` (a transformers model) to the attention above. Raises
    kvpool_transformers.UnsupportedModel for a model whose layers are not all full attention."""
    kvpool_transformers.geometry_from_config(model.config, "any", 1)  # refuses windows, MLA, shared KV
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION_NAME, lower_right_causal_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, no_mask_unless_padded)
    model.set_attn_implementation(ATTENTION_NAME)
    return model
