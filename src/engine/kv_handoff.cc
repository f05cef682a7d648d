#include "engine/kv_handoff.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvpool::engine {

Result<KvHandoffLayouts> HandoffLayoutsOf(const KvHandoffRequest& r) {
  if (r.stage_caches.empty() || r.stage_caches.size() != r.stage_first_layers.size() ||
      r.stage_caches.size() != r.stage_block_tables.size()) {
    return InvalidArgument("handoff: stages, first layers and block tables must match one to one");
  }
  if (r.decode_caches.empty() || r.decode_caches.size() != r.decode_block_tables.size() ||
      std::find(r.decode_caches.begin(), r.decode_caches.end(), nullptr) != r.decode_caches.end()) {
    return InvalidArgument("handoff: decode caches and block tables must match one to one");
  }
  KvHandoffLayouts out;
  handoff::PrefillLayout& prefill = out.prefill;
  const connector::PagedKvLayout& first = r.stage_caches[0]->layout;
  prefill.kind = first.kind;
  prefill.bytes_per_token_per_layer = first.bytes_per_token_per_layer;
  prefill.block_tokens = first.block_tokens;
  for (size_t s = 0; s < r.stage_caches.size(); ++s) {
    // The planner splits the model's layers in stage order from layer 0.
    if (r.stage_first_layers[s] != prefill.total_layers()) {
      return InvalidArgument(fmt::format("handoff: stage {} starts at layer {}, expected {}", s,
                                         r.stage_first_layers[s], prefill.total_layers()));
    }
    prefill.stage_layers.push_back(r.stage_caches[s]->layout.num_layers);
    out.bytes += r.tokens * r.stage_caches[s]->layout.num_layers * first.bytes_per_token_per_layer;
  }
  const connector::PagedKvLayout& d = r.decode_caches[0]->layout;
  out.decode.kind = d.kind;
  out.decode.num_layers = d.num_layers;
  out.decode.bytes_per_token_per_layer = d.bytes_per_token_per_layer;
  out.decode.block_tokens = d.block_tokens;
  out.decode.dcp_ranks = static_cast<uint32_t>(r.decode_caches.size());
  out.decode.interleave = r.decode_interleave;
  return out;
}

void KvHandoffMetrics::AppendPrometheus(std::string* out) const {
  seconds.AppendTo(out, "kvpool_handoff_seconds", "One request's KV handoff from prefill to decode, wall clock.");
  bytes.AppendTo(out, "kvpool_handoff_bytes", "Bytes one request's KV handoff moved.");
}

}  // namespace kvpool::engine
