// The design's published handoff example, shared by bench/gpu/handoff_bench.cc (one stage, GPU to
// GPU) and bench/handoff_network_bench.cc (every stage, between processes): an MLA model of
// 20/20/20/18 layers at 576 B per token-layer in blocks of 64 tokens, decoded by TP4+DCP4
// (interleave 1, all 78 layers), and the 8,192-token chunk [8192, 16384) of a request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "handoff/handoff_layouts.h"

namespace kvpool::bench {

constexpr uint64_t kExampleFirstToken = 8192, kExampleEndToken = 16384;

inline handoff::PrefillLayout ExamplePrefill() {
  handoff::PrefillLayout prefill;
  prefill.kind = handoff::KvLayoutKind::kLatent;
  prefill.stage_layers = {20, 20, 20, 18};
  prefill.bytes_per_token_per_layer = 576;
  prefill.block_tokens = 64;
  return prefill;
}

inline handoff::DecodeLayout ExampleDecode() {
  handoff::DecodeLayout decode;
  decode.kind = handoff::KvLayoutKind::kLatent;
  decode.num_layers = 78;
  decode.bytes_per_token_per_layer = 576;
  decode.block_tokens = 64;
  decode.dcp_ranks = 4;
  decode.interleave = 1;
  return decode;
}

// Distinct 8-byte words (a splitmix of each word's index, from `seed`): cheap to make, and no
// two rows of a cache alike, so a misplaced row cannot compare equal.
inline void FillDistinct(std::span<std::byte> bytes, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(bytes.data() + i, &z, 8);
  }
}

}  // namespace kvpool::bench
