#include "connector/prefix_lookup.h"

#include <chrono>

#include <fmt/format.h>

namespace kvpool::connector {

Result<PrefixHit> FindCachedPrefix(ChunkStore& store, const KvNamespace& ns, std::span<const TokenId> tokens,
                                   uint64_t gpu_cached_tokens, ConnectorMetrics* metrics) {
  if (gpu_cached_tokens > tokens.size()) {
    return InvalidArgument(fmt::format("prefix lookup: GPU holds {} tokens of a {}-token request", gpu_cached_tokens,
                                       tokens.size()));
  }
  const KvModelSpec& spec = ns.spec();
  PrefixHit hit;
  hit.chunk_tokens = spec.chunk_tokens;
  hit.num_stages = spec.num_stages();
  hit.gpu_cached_tokens = gpu_cached_tokens;
  hit.chunk_keys = ChainChunkKeys(ns, tokens);
  hit.first_chunk = gpu_cached_tokens / spec.chunk_tokens;
  if (hit.first_chunk >= hit.chunk_keys.size()) return hit;

  const uint64_t candidates = hit.chunk_keys.size() - hit.first_chunk;
  const std::vector<std::string> keys =
      StageObjectKeys(ns, std::span<const ChunkKey>(hit.chunk_keys).subspan(hit.first_chunk));
  const auto asked = std::chrono::steady_clock::now();
  hit.lookup = store.Lookup(keys);
  if (metrics) {
    metrics->lookups.fetch_add(1, std::memory_order_relaxed);
    metrics->lookup_seconds.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
  }
  if (hit.lookup->size() != keys.size()) {
    return Internal(fmt::format("prefix lookup: {} answers for {} keys", hit.lookup->size(), keys.size()));
  }
  // A chunk counts only if every stage holds it with the size this namespace implies (a
  // wrong size means a different layout under the same name: never unpack it). Stages may
  // live in different pool parts, evicted by different masters: the hit ends at the first
  // chunk any stage lacks, for every stage.
  const auto held = [&](uint64_t i, uint32_t s) {
    const Result<uint64_t>& len = hit.lookup->length(hit.lookup_index(i, s));
    return len.ok() && len.value() == spec.stage_object_bytes(s);
  };
  uint32_t held_at_stop = 0;  // stages that hold the chunk the hit stops at
  for (; hit.hit_chunks < candidates; ++hit.hit_chunks) {
    held_at_stop = 0;
    for (uint32_t s = 0; s < hit.num_stages; ++s) held_at_stop += held(hit.hit_chunks, s) ? 1 : 0;
    if (held_at_stop < hit.num_stages) break;
  }
  if (metrics) {
    metrics->lookup_hit_chunks.fetch_add(hit.hit_chunks, std::memory_order_relaxed);
    metrics->lookup_hit_tokens.fetch_add(hit.restorable_tokens(), std::memory_order_relaxed);
    if (hit.hit_chunks < candidates && held_at_stop > 0)
      metrics->lookup_partial_chunks.fetch_add(1, std::memory_order_relaxed);
    // A part that was not reached fails every key it holds, so the first chunk tells.
    for (uint32_t s = 0; s < hit.num_stages; ++s) {
      const StatusCode code = hit.lookup->length(hit.lookup_index(0, s)).status().code();
      if (code == StatusCode::kUnavailable || code == StatusCode::kTimeout)
        metrics->lookup_unreachable_stages.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return hit;
}

}  // namespace kvpool::connector
