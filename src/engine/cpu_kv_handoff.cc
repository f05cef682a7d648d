#include <cstring>

#include <fmt/format.h>

#include "engine/kv_handoff.h"

namespace kvpool::engine {
namespace {

// Layouts compatible (ValidateHandoffLayouts) and every table long enough for its tokens.
Status CheckRequest(const KvHandoffRequest& r, const KvHandoffLayouts& layouts) {
  KVPOOL_RETURN_IF_ERROR(handoff::ValidateHandoffLayouts(layouts.prefill, layouts.decode));
  const handoff::DcpTokenMap map = layouts.decode.token_map();
  for (size_t d = 0; d < r.decode_caches.size(); ++d) {
    const connector::PagedKvLayout& l = r.decode_caches[d]->layout;
    if (l.kind != layouts.decode.kind || l.num_layers != layouts.decode.num_layers ||
        l.bytes_per_token_per_layer != layouts.decode.bytes_per_token_per_layer) {
      return InvalidArgument(fmt::format("handoff: decode rank {} has another layout than rank 0", d));
    }
    const uint64_t held = map.CountBelow(static_cast<uint32_t>(d), r.tokens);
    if (r.decode_block_tables[d].size() * l.block_tokens < held) {
      return InvalidArgument(fmt::format("handoff: decode rank {} block table covers {} of its {} tokens", d,
                                         r.decode_block_tables[d].size() * l.block_tokens, held));
    }
  }
  for (size_t s = 0; s < r.stage_caches.size(); ++s) {
    if (r.stage_block_tables[s].size() * r.stage_caches[s]->layout.block_tokens < r.tokens) {
      return InvalidArgument(fmt::format("handoff: stage {} block table covers too few tokens", s));
    }
  }
  return Status::Ok();
}

class CpuKvHandoff final : public KvHandoff {
 public:
  Result<uint64_t> Transfer(const KvHandoffRequest& r) override {
    auto layouts = HandoffLayoutsOf(r);
    if (!layouts.ok()) return layouts.status();
    KVPOOL_RETURN_IF_ERROR(CheckRequest(r, *layouts));
    const handoff::DcpTokenMap map = layouts->decode.token_map();
    for (size_t s = 0; s < r.stage_caches.size(); ++s) {
      const connector::PagedKvCache& src = *r.stage_caches[s];
      const uint32_t entry = src.layout.plane_token_bytes();
      for (uint32_t layer = 0; layer < src.layout.num_layers; ++layer) {
        for (uint32_t plane = 0; plane < src.layout.planes_per_layer(); ++plane) {
          for (uint64_t t = 0; t < r.tokens; ++t) {
            const uint32_t rank = map.Owner(t);
            std::memcpy(r.decode_caches[rank]->TokenAddress(r.decode_block_tables[rank],
                                                            r.stage_first_layers[s] + layer, plane, map.Local(t)),
                        src.TokenAddress(r.stage_block_tables[s], layer, plane, t), entry);
          }
        }
      }
    }
    return layouts->bytes;
  }
  const char* name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<KvHandoff> NewCpuKvHandoff() { return std::make_unique<CpuKvHandoff>(); }

}  // namespace kvpool::engine
