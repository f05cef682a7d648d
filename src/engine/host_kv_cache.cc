#include "engine/host_kv_cache.h"

namespace kvpool::engine {

HostKvCache::HostKvCache(const connector::PagedKvLayout& layout, uint64_t num_blocks) {
  cache_.layout = layout;
  cache_.num_blocks = num_blocks;
  const uint64_t plane_bytes = layout.plane_bytes(num_blocks);
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    // Value-initialised: pages are touched lazily by the kernel, so an idle cache costs little.
    planes_.push_back(std::make_unique<std::byte[]>(plane_bytes));
    cache_.plane_bases.push_back(planes_.back().get());
    bytes_ += plane_bytes;
  }
}

}  // namespace kvpool::engine
