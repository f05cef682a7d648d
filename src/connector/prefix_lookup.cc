#include "connector/prefix_lookup.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "connector/first_tokens_marker.h"

namespace kvpool::connector {
namespace {

// Why the lookup stopped at chunk hit.first_chunk + hit.hit_chunks, which `held` stages hold:
// some stages hold it; else a stage that could not be asked (nothing is known of that chunk);
// else what the stages say, the most telling first: evicted (the pool had it), pending (it is
// being saved), never stored.
MissReason ClassifyMiss(PrefixHit& hit, uint32_t held) {
  if (held > 0) return MissReason::kPartialStages;
  MissReason reason = MissReason::kNeverStored;
  for (uint32_t s = 0; s < hit.num_stages; ++s) {
    const size_t index = hit.lookup_index(hit.hit_chunks, s);
    const StatusCode code = hit.lookup->length(index).status().code();
    if (code == StatusCode::kUnavailable || code == StatusCode::kTimeout) return MissReason::kUnreachable;
    if (const uint64_t age = hit.lookup->evicted_ms_ago(index); age > 0) {
      reason = MissReason::kEvicted;
      hit.miss_evicted_ms_ago = std::max(hit.miss_evicted_ms_ago, age);
    } else if (code == StatusCode::kNotReady && reason == MissReason::kNeverStored) {
      reason = MissReason::kPending;
    }
  }
  return reason;
}

}  // namespace

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
  if (hit.hit_chunks < candidates) hit.miss = ClassifyMiss(hit, held_at_stop);
  if (hit.miss == MissReason::kNeverStored && hit.first_chunk == 0 && hit.hit_chunks == 0) {
    // Nothing of the prompt: a key mismatch looks the same unless the first tokens' marker says.
    if (std::optional<std::string> other = OtherNamespaceOf(store, ns, FirstTokensMarkerKey(tokens))) {
      hit.miss = MissReason::kKeyMismatch;
      hit.other_namespace = std::move(*other);
      static std::once_flag warned;  // a misconfiguration: say it once, the counter says how often
      std::call_once(warned, [&] {
        spdlog::warn("kvpool connector: the pool holds this prompt's first tokens under another KV namespace, so "
                     "nothing saved by that engine can be restored here: pool has [{}], this engine is [{}]",
                     hit.other_namespace, KvNamespace::CanonicalText(spec));
      });
    }
  }
  if (metrics) {
    metrics->lookup_hit_chunks.fetch_add(hit.hit_chunks, std::memory_order_relaxed);
    metrics->lookup_hit_tokens.fetch_add(hit.restorable_tokens(), std::memory_order_relaxed);
    switch (hit.miss) {
      case MissReason::kPartialStages:
        metrics->lookup_partial_chunks.fetch_add(1, std::memory_order_relaxed);
        break;
      case MissReason::kEvicted:
        metrics->lookup_miss_evicted.fetch_add(1, std::memory_order_relaxed);
        metrics->lookup_miss_evicted_age_seconds.ObserveNs(hit.miss_evicted_ms_ago * 1'000'000);
        break;
      case MissReason::kPending:
        metrics->lookup_miss_pending.fetch_add(1, std::memory_order_relaxed);
        break;
      case MissReason::kNeverStored:
        metrics->lookup_miss_never_stored.fetch_add(1, std::memory_order_relaxed);
        break;
      case MissReason::kKeyMismatch:
        metrics->lookup_miss_key_mismatch.fetch_add(1, std::memory_order_relaxed);
        break;
      case MissReason::kNone:
      case MissReason::kUnreachable:
        break;
    }
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
