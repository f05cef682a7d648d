#include "handoff/handoff_layouts.h"

#include <fmt/format.h>

namespace kvpool::handoff {
namespace {

const char* KindName(KvLayoutKind k) { return k == KvLayoutKind::kLatent ? "latent" : "split K/V"; }

uint32_t PlanesOf(KvLayoutKind k) { return k == KvLayoutKind::kLatent ? 1 : 2; }

Status CheckTokenBytes(const char* side, KvLayoutKind kind, uint32_t bytes) {
  if (bytes == 0 || bytes % PlanesOf(kind) != 0) {
    return InvalidArgument(fmt::format("{} layout: bytes_per_token_per_layer {} does not split into {} plane(s)", side,
                                       bytes, PlanesOf(kind)));
  }
  return Status::Ok();
}

}  // namespace

uint32_t PrefillLayout::total_layers() const {
  uint32_t n = 0;
  for (uint32_t l : stage_layers) n += l;
  return n;
}

uint32_t PrefillLayout::first_layer(uint32_t p) const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < p; ++i) n += stage_layers[i];
  return n;
}

PagedKvLayout PrefillLayout::RankLayout(uint32_t p) const {
  PagedKvLayout l;
  l.kind = kind;
  l.num_layers = stage_layers.at(p);
  l.block_tokens = block_tokens;
  l.bytes_per_token_per_layer = bytes_per_token_per_layer;
  return l;
}

Status PrefillLayout::Validate() const {
  if (stage_layers.empty()) return InvalidArgument("prefill layout: no pipeline ranks (stage_layers is empty)");
  uint64_t sum = 0;
  for (size_t p = 0; p < stage_layers.size(); ++p) {
    if (stage_layers[p] == 0) return InvalidArgument(fmt::format("prefill layout: PP rank {} has no layers", p));
    sum += stage_layers[p];
  }
  if (sum > UINT32_MAX) return InvalidArgument(fmt::format("prefill layout: {} layers in total", sum));
  if (block_tokens == 0) return InvalidArgument("prefill layout: block_tokens is 0");
  return CheckTokenBytes("prefill", kind, bytes_per_token_per_layer);
}

PagedKvLayout DecodeLayout::RankLayout() const {
  PagedKvLayout l;
  l.kind = kind;
  l.num_layers = num_layers;
  l.block_tokens = block_tokens;
  l.bytes_per_token_per_layer = bytes_per_token_per_layer;
  return l;
}

Status DecodeLayout::Validate() const {
  if (num_layers == 0) return InvalidArgument("decode layout: num_layers is 0");
  if (block_tokens == 0) return InvalidArgument("decode layout: block_tokens is 0");
  if (dcp_ranks == 0) return InvalidArgument("decode layout: dcp_ranks (W) is 0");
  if (interleave == 0) return InvalidArgument("decode layout: interleave (I) is 0");
  return CheckTokenBytes("decode", kind, bytes_per_token_per_layer);
}

Status ValidateHandoffLayouts(const PrefillLayout& prefill, const DecodeLayout& decode) {
  KVPOOL_RETURN_IF_ERROR(prefill.Validate());
  KVPOOL_RETURN_IF_ERROR(decode.Validate());
  if (prefill.kind != decode.kind) {
    return InvalidArgument(fmt::format("handoff layouts: prefill stores {} KV, decode stores {} KV",
                                       KindName(prefill.kind), KindName(decode.kind)));
  }
  if (prefill.bytes_per_token_per_layer != decode.bytes_per_token_per_layer) {
    return InvalidArgument(fmt::format("handoff layouts: prefill has {} B per token-layer, decode {} B",
                                       prefill.bytes_per_token_per_layer, decode.bytes_per_token_per_layer));
  }
  if (prefill.total_layers() != decode.num_layers) {
    std::string split;
    for (uint32_t l : prefill.stage_layers) {
      if (!split.empty()) split.push_back('/');
      split.append(std::to_string(l));
    }
    return InvalidArgument(fmt::format("handoff layouts: prefill layer split {} sums to {} layers, decode has {}",
                                       split, prefill.total_layers(), decode.num_layers));
  }
  return Status::Ok();
}

}  // namespace kvpool::handoff
