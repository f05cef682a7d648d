#include "engine/kv_pattern.h"

#include <algorithm>
#include <cstring>

namespace kvpool::engine {
namespace {

// The bytes of one (token, layer, plane): 8-byte words of a hash stream.
void FillEntry(std::byte* out, uint32_t bytes, uint64_t block_key, uint32_t layer, uint32_t plane, uint64_t token) {
  const uint64_t seed = KvEntrySeed(block_key, layer, plane, token);
  for (uint32_t off = 0; off < bytes; off += 8) {
    const uint64_t word = KvPatternWord(seed, off);
    std::memcpy(out + off, &word, std::min<uint32_t>(8, bytes - off));
  }
}

}  // namespace

std::vector<uint64_t> ChainBlockKeys(std::span<const connector::TokenId> tokens, uint32_t block_tokens) {
  std::vector<uint64_t> keys((tokens.size() + block_tokens - 1) / block_tokens);
  uint64_t key = 0x6b76706f6f6c0001ULL;  // any fixed start
  for (size_t b = 0; b < keys.size(); ++b) {
    const size_t end = std::min(tokens.size(), (b + 1) * block_tokens);
    for (size_t i = b * block_tokens; i < end; ++i) key = Mix64(key ^ static_cast<uint32_t>(tokens[i]));
    keys[b] = key;
  }
  return keys;
}

void WriteKv(const connector::PagedKvCache& cache, std::span<const connector::BlockId> block_table,
             uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end) {
  const connector::PagedKvLayout& l = cache.layout;
  for (uint64_t t = begin; t < end; ++t) {
    const uint64_t key = block_keys[t / l.block_tokens];
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < l.planes_per_layer(); ++plane) {
        FillEntry(cache.TokenAddress(block_table, layer, plane, t), l.plane_token_bytes(), key, first_layer + layer,
                  plane, t);
      }
    }
  }
}

uint64_t CountKvMismatches(const connector::PagedKvCache& cache, std::span<const connector::BlockId> block_table,
                           uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end,
                           const CacheTokens& tokens) {
  const connector::PagedKvLayout& l = cache.layout;
  std::vector<std::byte> expected(l.plane_token_bytes());
  uint64_t mismatches = 0;
  for (uint64_t t = begin; t < end; ++t) {
    const uint64_t global = tokens.Global(t);
    const uint64_t key = block_keys[global / l.block_tokens];
    for (uint32_t layer = 0; layer < l.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < l.planes_per_layer(); ++plane) {
        FillEntry(expected.data(), l.plane_token_bytes(), key, first_layer + layer, plane, global);
        if (std::memcmp(expected.data(), cache.TokenAddress(block_table, layer, plane, t), expected.size()) != 0) {
          ++mismatches;
        }
      }
    }
  }
  return mismatches;
}

}  // namespace kvpool::engine
