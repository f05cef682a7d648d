#include <cstring>

#include <fmt/format.h>

#include "replay/kv_handoff.h"

namespace kvpool::replay {
namespace {

Status CheckRequest(const KvHandoffRequest& r) {
  if (r.decode_cache == nullptr || r.stage_caches.size() != r.stage_first_layers.size() ||
      r.stage_caches.size() != r.stage_block_tables.size()) {
    return InvalidArgument("handoff: stages, first layers and block tables must match one to one");
  }
  const connector::PagedKvLayout& d = r.decode_cache->layout;
  if (r.decode_block_table.size() * d.block_tokens < r.tokens) {
    return InvalidArgument(fmt::format("handoff: decode block table covers {} of {} tokens",
                                       r.decode_block_table.size() * d.block_tokens, r.tokens));
  }
  for (size_t s = 0; s < r.stage_caches.size(); ++s) {
    const connector::PagedKvLayout& p = r.stage_caches[s]->layout;
    if (p.kind != d.kind || p.bytes_per_token_per_layer != d.bytes_per_token_per_layer ||
        r.stage_first_layers[s] + p.num_layers > d.num_layers) {
      return InvalidArgument(fmt::format("handoff: stage {} does not fit the decode layout", s));
    }
    if (r.stage_block_tables[s].size() * p.block_tokens < r.tokens) {
      return InvalidArgument(fmt::format("handoff: stage {} block table covers too few tokens", s));
    }
  }
  return Status::Ok();
}

class CpuKvHandoff final : public KvHandoff {
 public:
  Result<uint64_t> Transfer(const KvHandoffRequest& r) override {
    KVPOOL_RETURN_IF_ERROR(CheckRequest(r));
    uint64_t bytes = 0;
    for (size_t s = 0; s < r.stage_caches.size(); ++s) {
      const connector::PagedKvCache& src = *r.stage_caches[s];
      const uint32_t entry = src.layout.plane_token_bytes();
      for (uint32_t layer = 0; layer < src.layout.num_layers; ++layer) {
        for (uint32_t plane = 0; plane < src.layout.planes_per_layer(); ++plane) {
          for (uint64_t t = 0; t < r.tokens; ++t) {
            std::memcpy(r.decode_cache->TokenAddress(r.decode_block_table, r.stage_first_layers[s] + layer, plane, t),
                        src.TokenAddress(r.stage_block_tables[s], layer, plane, t), entry);
          }
          bytes += r.tokens * entry;
        }
      }
    }
    return bytes;
  }
  const char* name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<KvHandoff> NewCpuKvHandoff() { return std::make_unique<CpuKvHandoff>(); }

}  // namespace kvpool::replay
