#include "connector/chunk_keys.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstring>

namespace kvpool::connector {
namespace {

// Little-endian bytes of the parent key, so keys are stable across hosts of one endianness
// (all supported targets are little-endian; tokens are hashed as their in-memory int32s).
ChunkKey HashChunk(uint64_t parent_high, uint64_t parent_low, std::span<const TokenId> tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  unsigned char parent[16];
  std::memcpy(parent, &parent_high, 8);
  std::memcpy(parent + 8, &parent_low, 8);
  XXH3_128bits_update(&state, parent, sizeof parent);
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return {h.high64, h.low64};
}

}  // namespace

std::vector<ChunkKey> ChainChunkKeys(const KvNamespace& ns, std::span<const TokenId> tokens) {
  const size_t chunk = ns.spec().chunk_tokens;
  const size_t full = tokens.size() / chunk;
  std::vector<ChunkKey> keys;
  keys.reserve(full);
  uint64_t high = ns.id_high(), low = ns.id_low();
  for (size_t i = 0; i < full; ++i) {
    const ChunkKey k = HashChunk(high, low, tokens.subspan(i * chunk, chunk));
    keys.push_back(k);
    high = k.high;
    low = k.low;
  }
  return keys;
}

std::string ChunkGroupName(const KvNamespace& ns, const ChunkKey& key) { return ns.hex() + "/" + key.hex(); }

std::string StageObjectKey(const KvNamespace& ns, const ChunkKey& key, uint32_t stage) {
  return ChunkGroupName(ns, key) + "/s" + std::to_string(stage);
}

std::vector<std::string> StageObjectKeys(const KvNamespace& ns, std::span<const ChunkKey> chunks) {
  std::vector<std::string> keys;
  const uint32_t stages = ns.spec().num_stages();
  keys.reserve(chunks.size() * stages);
  for (const ChunkKey& chunk : chunks) {
    for (uint32_t s = 0; s < stages; ++s) keys.push_back(StageObjectKey(ns, chunk, s));
  }
  return keys;
}

}  // namespace kvpool::connector
