// FindCachedPrefix: how much of a request's prompt the pool can supply beyond what the GPU
// prefix cache already holds — the longest run of chunks that *every* pipeline stage holds.
//
// One master round trip whatever the prompt length (a 1M-token prompt is ~3,900 chunks x P
// stage keys in one BatchLookup); a lookup that finds nothing of the prompt, where a key
// mismatch would look the same, also reads the first tokens' marker (first_tokens_marker.h). The lookup also takes read leases on what it finds, so a hit
// cannot be evicted or overwritten before the restore reads it; the restore must start before
// hit.lease_deadline().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_store.h"
#include "connector/connector_metrics.h"
#include "connector/kv_namespace.h"

namespace kvpool::connector {

// Why a lookup found less than every chunk of the request (issue 44: "why a lookup missed"),
// from the chunk it stopped at.
enum class MissReason {
  kNone,           // every chunk from first_chunk on is held (or nothing was looked up)
  kPartialStages,  // some stages hold the chunk, others do not
  kEvicted,        // no stage holds it, and a master evicted it (miss_evicted_ms_ago before)
  kPending,        // no stage holds it complete: a save of it has not ended
  kNeverStored,    // no stage holds it and no master has a record of it
  kKeyMismatch,    // nothing from chunk 0 on, and the pool holds the prompt under another
                   // namespace (first_tokens_marker.h): other_namespace says which
  kUnreachable,    // a stage's part could not be asked
};

struct PrefixHit {
  uint32_t chunk_tokens = 0;
  uint32_t num_stages = 0;
  uint64_t gpu_cached_tokens = 0;
  // Keys of every full chunk of the request (also what a later save needs).
  std::vector<ChunkKey> chunk_keys;
  // First chunk the GPU does not hold whole: gpu_cached_tokens / chunk_tokens.
  uint64_t first_chunk = 0;
  // Chunks from first_chunk on that every stage holds, in order, without a gap.
  uint64_t hit_chunks = 0;
  // The leased lookup; entry (first_chunk + i, stage s) is index i * num_stages + s.
  // Null when nothing was looked up.
  std::shared_ptr<const client::LookupResult> lookup;
  MissReason miss = MissReason::kNone;
  uint64_t miss_evicted_ms_ago = 0;  // kEvicted: the longest ago any stage's object was evicted
  std::string other_namespace;       // kKeyMismatch: the canonical text the pool holds the prompt under

  // Sequence tokens the GPU holds after a full restore.
  uint64_t end_token() const { return hit_chunks ? (first_chunk + hit_chunks) * chunk_tokens : gpu_cached_tokens; }
  // Tokens a restore adds beyond gpu_cached_tokens (what the engine need not compute).
  uint64_t restorable_tokens() const { return end_token() - gpu_cached_tokens; }
  size_t lookup_index(uint64_t hit_chunk, uint32_t stage) const { return hit_chunk * num_stages + stage; }
  std::chrono::steady_clock::time_point lease_deadline() const {
    return lookup ? lookup->lease_deadline() : std::chrono::steady_clock::time_point{};
  }
};

// REQUIRES: gpu_cached_tokens <= tokens.size(). `metrics` may be null.
Result<PrefixHit> FindCachedPrefix(ChunkStore& store, const KvNamespace& ns, std::span<const TokenId> tokens,
                                   uint64_t gpu_cached_tokens, ConnectorMetrics* metrics);

}  // namespace kvpool::connector
