// HostKvCache: a paged KV cache in host memory that owns its planes — the emulated "GPU"
// memory of one pipeline stage (prefill) or of a whole decode instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "connector/paged_kv_layout.h"

namespace kvpool::engine {

class HostKvCache {
 public:
  // Zero-filled planes of `num_blocks` blocks each. REQUIRES: layout.Validate().ok().
  HostKvCache(const connector::PagedKvLayout& layout, uint64_t num_blocks);
  HostKvCache(const HostKvCache&) = delete;
  HostKvCache& operator=(const HostKvCache&) = delete;

  const connector::PagedKvCache& cache() const { return cache_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<std::unique_ptr<std::byte[]>> planes_;
  connector::PagedKvCache cache_;
  uint64_t bytes_ = 0;
};

}  // namespace kvpool::engine
