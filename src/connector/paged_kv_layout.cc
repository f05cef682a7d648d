#include "connector/paged_kv_layout.h"

#include <fmt/format.h>

namespace kvpool::connector {

PagedKvLayout PagedKvLayout::ForStage(const KvModelSpec& spec, uint32_t stage) {
  PagedKvLayout l;
  l.kind = spec.layout;
  l.num_layers = spec.stage_layers.at(stage);
  l.block_tokens = spec.block_tokens;
  l.bytes_per_token_per_layer = spec.bytes_per_token_per_layer;
  return l;
}

Status PagedKvLayout::Validate() const {
  if (num_layers == 0) return InvalidArgument("paged KV layout: no layers");
  if (block_tokens == 0) return InvalidArgument("paged KV layout: block_tokens is 0");
  if (bytes_per_token_per_layer == 0 || bytes_per_token_per_layer % planes_per_layer() != 0) {
    return InvalidArgument(fmt::format("paged KV layout: bytes_per_token_per_layer {} does not split into {} plane(s)",
                                       bytes_per_token_per_layer, planes_per_layer()));
  }
  if (block_stride_bytes != 0 && block_stride_bytes < block_bytes()) {
    return InvalidArgument(fmt::format("paged KV layout: block stride {} B is below one block's {} B",
                                       block_stride_bytes, block_bytes()));
  }
  return Status::Ok();
}

Status PagedKvCache::Validate() const {
  KVPOOL_RETURN_IF_ERROR(layout.Validate());
  if (plane_bases.size() != layout.num_planes()) {
    return InvalidArgument(fmt::format("paged KV cache: {} plane bases for {} layers x {} planes", plane_bases.size(),
                                       layout.num_layers, layout.planes_per_layer()));
  }
  for (size_t i = 0; i < plane_bases.size(); ++i) {
    if (plane_bases[i] == nullptr) return InvalidArgument(fmt::format("paged KV cache: plane {} has no address", i));
  }
  if (num_blocks == 0) return InvalidArgument("paged KV cache: num_blocks is 0");
  return Status::Ok();
}

}  // namespace kvpool::connector
