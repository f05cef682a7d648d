// Test-only: a paged KV cache in host memory, filled with recognisable bytes.
#pragma once

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "connector/kv_namespace.h"
#include "connector/paged_kv_layout.h"

namespace kvpool::connector::testing {

class HostKvCache {
 public:
  HostKvCache(const PagedKvLayout& layout, uint64_t num_blocks) : planes_(layout.num_planes()) {
    cache_.layout = layout;
    cache_.num_blocks = num_blocks;
    for (auto& p : planes_) {
      p.assign(layout.plane_bytes(num_blocks), std::byte{0});
      cache_.plane_bases.push_back(p.data());
    }
  }
  const PagedKvCache& cache() const { return cache_; }
  std::vector<std::vector<std::byte>>& planes() { return planes_; }
  void FillRandom(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (auto& p : planes_) {
      for (auto& b : p) b = static_cast<std::byte>(rng());
    }
  }
  void Clear() {
    for (auto& p : planes_) std::fill(p.begin(), p.end(), std::byte{0});
  }
  // Bytes of `token` (sequence position) for every plane, concatenated.
  std::vector<std::byte> TokenBytes(const std::vector<BlockId>& table, uint64_t token) const {
    std::vector<std::byte> out;
    const PagedKvLayout& l = cache_.layout;
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < l.planes_per_layer(); ++plane) {
        const std::byte* a = cache_.TokenAddress(table, layer, plane, token);
        out.insert(out.end(), a, a + l.plane_token_bytes());
      }
    }
    return out;
  }

 private:
  PagedKvCache cache_;
  std::vector<std::vector<std::byte>> planes_;
};

// `blocks` distinct block ids in [0, num_blocks), shuffled.
inline std::vector<BlockId> RandomBlockTable(uint64_t blocks, uint64_t num_blocks, uint64_t seed) {
  std::vector<BlockId> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(blocks);
  return all;
}

inline KvModelSpec SmallSpec(KvLayoutKind kind, std::vector<uint32_t> stage_layers, uint32_t bytes = 576) {
  KvModelSpec spec;
  spec.model_id = "test-model";
  spec.kv_dtype = "fp8";
  spec.layout = kind;
  spec.bytes_per_token_per_layer = bytes;
  spec.stage_layers = std::move(stage_layers);
  spec.block_tokens = 16;
  spec.chunk_tokens = 64;
  return spec;
}

}  // namespace kvpool::connector::testing
