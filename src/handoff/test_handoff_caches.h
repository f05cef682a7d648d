// Test-only: paged KV caches in host memory for both sides of a handoff, the deterministic
// bytes every token-layer carries, and random layouts/scenarios for property tests. Used by the
// CPU tests here and by the GPU test (tests/gpu/handoff_gpu_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "handoff/handoff_plan.h"

namespace kvpool::handoff::testing {

// The byte a prefill cache holds at `byte` of (global layer, plane, global token): any change of
// any argument changes it with high probability, so a misplaced row cannot look right.
inline std::byte KvByte(uint32_t layer, uint32_t plane, uint64_t token, uint32_t byte) {
  uint64_t x = (uint64_t{layer} << 48) ^ (uint64_t{plane} << 47) ^ (token << 16) ^ byte;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<std::byte>(x);
}

// A PagedKvCache over host vectors.
class HostCache {
 public:
  HostCache(const PagedKvLayout& layout, uint64_t num_blocks) : planes_(layout.num_planes()) {
    cache_.layout = layout;
    cache_.num_blocks = num_blocks;
    for (auto& p : planes_) {
      p.assign(layout.plane_bytes(num_blocks), std::byte{0});
      cache_.plane_bases.push_back(p.data());
    }
  }
  HostCache(HostCache&&) = default;
  const PagedKvCache& cache() const { return cache_; }
  std::vector<std::vector<std::byte>>& planes() { return planes_; }
  const std::vector<std::vector<std::byte>>& planes() const { return planes_; }
  void FillRandom(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (auto& p : planes_) {
      for (auto& b : p) b = static_cast<std::byte>(rng());
    }
  }
  // Writes KvByte(first_global_layer + layer, plane, token, i) at every token of [0, end_token)
  // that `table` covers, for every layer and plane. `token_of(t)` maps the cache's token index to
  // the global token it holds (identity on prefill).
  template <typename F>
  void FillTokens(std::span<const BlockId> table, uint64_t end_token, uint32_t first_global_layer, F token_of) {
    const PagedKvLayout& l = cache_.layout;
    for (uint64_t t = 0; t < end_token; ++t) {
      for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
        for (uint32_t plane = 0; plane < l.planes_per_layer(); ++plane) {
          std::byte* a = cache_.TokenAddress(table, layer, plane, t);
          for (uint32_t i = 0; i < l.plane_token_bytes(); ++i) {
            a[i] = KvByte(first_global_layer + layer, plane, token_of(t), i);
          }
        }
      }
    }
  }

 private:
  PagedKvCache cache_;
  std::vector<std::vector<std::byte>> planes_;
};

// `blocks` distinct block ids in [0, num_blocks), shuffled (non-contiguous, any order).
inline std::vector<BlockId> RandomBlockTable(uint64_t blocks, uint64_t num_blocks, std::mt19937_64& rng) {
  std::vector<BlockId> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(blocks);
  return all;
}

template <typename T>
T Pick(std::mt19937_64& rng, std::initializer_list<T> options) {
  return options.begin()[rng() % options.size()];
}

// A random pair of compatible layouts and a request range (sizes kept small for fast tests).
struct RandomCase {
  PrefillLayout prefill;
  DecodeLayout decode;
  uint64_t first_token = 0;
  uint64_t end_token = 0;
  uint64_t extra_stride = 0;  // > 0: caches with block_stride = block bytes + extra_stride
};

inline RandomCase MakeRandomCase(std::mt19937_64& rng) {
  RandomCase c;
  const bool latent = rng() % 2 == 0;
  const KvLayoutKind kind = latent ? KvLayoutKind::kLatent : KvLayoutKind::kSplitKv;
  const uint32_t bytes = latent ? Pick<uint32_t>(rng, {576, 64, 36, 7, 16}) : Pick<uint32_t>(rng, {512, 72, 36, 8, 2});
  c.prefill.kind = kind;
  c.prefill.bytes_per_token_per_layer = bytes;
  c.prefill.block_tokens = Pick<uint32_t>(rng, {1, 4, 7, 16, 64});
  const uint32_t pp = 1 + rng() % 4;
  for (uint32_t p = 0; p < pp; ++p) c.prefill.stage_layers.push_back(1 + rng() % 4);
  c.decode.kind = kind;
  c.decode.bytes_per_token_per_layer = bytes;
  c.decode.num_layers = c.prefill.total_layers();
  c.decode.block_tokens = Pick<uint32_t>(rng, {1, 3, 16, 64});
  c.decode.dcp_ranks = 1 + rng() % 8;
  c.decode.interleave = Pick<uint32_t>(rng, {1, 2, 3, 16, 5});
  c.first_token = rng() % 3 == 0 ? 0 : rng() % 300;
  c.end_token = c.first_token + 1 + rng() % 400;
  c.extra_stride = rng() % 4 == 0 ? 16 * (1 + rng() % 3) : 0;
  return c;
}

// Host caches and block tables of every rank on both sides for one RandomCase. Prefill caches
// hold KvByte for every token of their tables; decode caches hold random sentinel bytes.
struct HostScenario {
  RandomCase c;
  std::vector<HostCache> prefill;
  std::vector<std::vector<BlockId>> prefill_tables;
  std::vector<HostCache> decode;
  std::vector<std::vector<BlockId>> decode_tables;
};

inline PagedKvLayout WithStride(PagedKvLayout l, uint64_t extra) {
  if (extra) l.block_stride_bytes = l.block_bytes() + extra;
  return l;
}

inline HostScenario MakeHostScenario(const RandomCase& c, std::mt19937_64& rng) {
  HostScenario s;
  s.c = c;
  for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
    const uint64_t blocks = (c.end_token + c.prefill.block_tokens - 1) / c.prefill.block_tokens;
    const uint64_t num_blocks = blocks + rng() % 8;
    s.prefill.emplace_back(WithStride(c.prefill.RankLayout(p), c.extra_stride), num_blocks);
    s.prefill.back().FillRandom(rng());
    s.prefill_tables.push_back(RandomBlockTable(blocks, num_blocks, rng));
    s.prefill.back().FillTokens(s.prefill_tables.back(), blocks * c.prefill.block_tokens, c.prefill.first_layer(p),
                                [](uint64_t t) { return t; });
  }
  const DcpTokenMap map = c.decode.token_map();
  for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
    const uint64_t local_end = map.CountBelow(d, c.end_token);
    const uint64_t blocks = std::max<uint64_t>(1, (local_end + c.decode.block_tokens - 1) / c.decode.block_tokens);
    const uint64_t num_blocks = blocks + rng() % 8;
    s.decode.emplace_back(WithStride(c.decode.RankLayout(), c.extra_stride), num_blocks);
    s.decode.back().FillRandom(rng());
    s.decode_tables.push_back(RandomBlockTable(blocks, num_blocks, rng));
  }
  return s;
}

// What the decode caches must hold after the handoff of [first_token, end_token): their initial
// bytes, with exactly every (token, layer, plane) of the range written at its owner's
// (block, slot) and nothing else changed. Computed from the layout definition alone.
inline std::vector<std::vector<std::vector<std::byte>>> ExpectedDecodePlanes(const HostScenario& s) {
  std::vector<std::vector<std::vector<std::byte>>> want;
  for (const HostCache& d : s.decode) want.push_back(d.planes());
  const DecodeLayout& dl = s.c.decode;
  const PagedKvLayout layout = s.decode[0].cache().layout;
  for (uint64_t g = s.c.first_token; g < s.c.end_token; ++g) {
    const uint32_t owner = static_cast<uint32_t>((g / dl.interleave) % dl.dcp_ranks);
    const uint64_t local = (g / (uint64_t{dl.interleave} * dl.dcp_ranks)) * dl.interleave + g % dl.interleave;
    const uint64_t block = static_cast<uint64_t>(s.decode_tables[owner][local / dl.block_tokens]);
    const uint64_t offset = block * layout.block_stride() + (local % dl.block_tokens) * layout.plane_token_bytes();
    for (uint32_t layer = 0; layer < dl.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < layout.planes_per_layer(); ++plane) {
        std::byte* dst = want[owner][layer * layout.planes_per_layer() + plane].data() + offset;
        for (uint32_t i = 0; i < layout.plane_token_bytes(); ++i) dst[i] = KvByte(layer, plane, g, i);
      }
    }
  }
  return want;
}

}  // namespace kvpool::handoff::testing
