// Chunk keys: a chained hash over 256-token (chunk_tokens) chunks of a token sequence.
//
//   key[0] = xxh3_128(namespace id || tokens[0, C))
//   key[i] = xxh3_128(key[i-1]     || tokens[iC, (i+1)C))
//
// So key[i] names the whole prefix tokens[0, (i+1)C), not just chunk i: a change at token t
// keeps every key of the chunks that end at or before t's chunk start, and changes all later
// keys. Only full chunks get keys; a partial tail is never stored.
//
// Pool names (one object per pipeline stage, one eviction group per chunk):
//   group:  "<namespace-hex>/<chunk-hex>"
//   object: "<namespace-hex>/<chunk-hex>/s<stage>"
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "connector/kv_namespace.h"

namespace kvpool::connector {

using TokenId = int32_t;

struct ChunkKey {
  uint64_t high = 0, low = 0;
  std::string hex() const { return Hex128(high, low); }
  friend bool operator==(const ChunkKey&, const ChunkKey&) = default;
};

// Keys of every full chunk of `tokens` (tokens.size() / chunk_tokens of them).
std::vector<ChunkKey> ChainChunkKeys(const KvNamespace& ns, std::span<const TokenId> tokens);

// The eviction group shared by all stage objects of one chunk.
std::string ChunkGroupName(const KvNamespace& ns, const ChunkKey& key);
// The pool key of `stage`'s object for one chunk.
std::string StageObjectKey(const KvNamespace& ns, const ChunkKey& key, uint32_t stage);
// Every stage object key of `chunks`, chunk by chunk, stage by stage: what a lookup of them
// asks for, and what a router's hints about a session name.
std::vector<std::string> StageObjectKeys(const KvNamespace& ns, std::span<const ChunkKey> chunks);

}  // namespace kvpool::connector
