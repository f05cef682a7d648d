// The deterministic KV bytes of the emulated model, so every restore and handoff can be
// verified byte for byte.
//
// A token's KV for one layer is a function of (the chained key of the token's 16-token
// block, the layer, the token's position). The block key chains like a chunk key
// (key[i] = mix(key[i-1], tokens of block i)), so it names the whole prefix up to the end of
// its block. The *block* key rather than the 256-token chunk key: the GPU prefix cache
// shares KV at block granularity, and a chunk key would change when a partial chunk is
// completed by a later turn although the block's KV did not.
//
// Everything that writes KV (prefill) and everything that checks it (restore, handoff) uses
// these functions; a mismatch can only come from a bug in moving or placing bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "connector/chunk_keys.h"
#include "connector/paged_kv_layout.h"
#include "handoff/handoff_layouts.h"
#include "engine/kv_pattern_word.h"

namespace kvpool::engine {

// One key per block of `block_tokens` tokens, the last one possibly partial.
std::vector<uint64_t> ChainBlockKeys(std::span<const connector::TokenId> tokens, uint32_t block_tokens);

// Host-memory caches only; kv_cache_memory.h dispatches to the CUDA versions for device memory.
// Writes the KV of tokens [begin, end) into `cache` (one pipeline stage whose first global
// layer is `first_layer`) at the places `block_table` says.
void WriteKv(const connector::PagedKvCache& cache, std::span<const connector::BlockId> block_table,
             uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end);

// Which of a sequence's tokens a cache holds, in its own (local) order: every token (the
// default: local == global), or those of one decode DCP rank.
struct CacheTokens {
  handoff::DcpTokenMap map;
  uint32_t rank = 0;

  KVPOOL_HOST_DEVICE uint64_t Global(uint64_t local) const { return map.Global(rank, local); }
};

// Number of (token, layer, plane) entries among the cache's local tokens [begin, end) whose
// bytes differ from what WriteKv writes for their global tokens (block_keys are per global block).
uint64_t CountKvMismatches(const connector::PagedKvCache& cache, std::span<const connector::BlockId> block_table,
                           uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end,
                           const CacheTokens& tokens = {});

}  // namespace kvpool::engine
