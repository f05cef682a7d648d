// ConnectorMetrics: counters and latency histograms of what the connector did, for a
// process's /metrics (AppendPrometheus) and tests. Every field only grows; read any time from
// any thread.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <span>
#include <string_view>

#include "common/histogram.h"

namespace kvpool::connector {

struct ConnectorMetrics {
  // Lookup (one master round trip each).
  std::atomic<uint64_t> lookups{0};
  std::atomic<uint64_t> lookup_hit_chunks{0};
  std::atomic<uint64_t> lookup_hit_tokens{0};
  // Lookups that stopped at a chunk some stages hold and others do not (one part evicted its
  // stage's object): that chunk and everything after it are computed, never half-restored.
  std::atomic<uint64_t> lookup_partial_chunks{0};
  // Stages whose part could not be asked (master unreachable or past the deadline): a lookup
  // counts as no hit from the first such stage on.
  std::atomic<uint64_t> lookup_unreachable_stages{0};
  // Why a lookup stopped where it did (prefix_lookup.h, MissReason), one per lookup that found
  // less than the whole request: no stage holds the chunk and its master evicted it; a save of
  // it has not ended; no stage holds it and no master has a record of it (new tokens, or
  // evicted longer ago than the masters remember); nothing from chunk 0 on, and the pool holds
  // the prompt under another namespace (another model, dtype, layout, block or chunk size:
  // first_tokens_marker.h). Stops at a chunk some stages hold are lookup_partial_chunks; at a
  // stage that could not be asked, lookup_unreachable_stages.
  std::atomic<uint64_t> lookup_miss_evicted{0};
  std::atomic<uint64_t> lookup_miss_pending{0};
  std::atomic<uint64_t> lookup_miss_never_stored{0};
  std::atomic<uint64_t> lookup_miss_key_mismatch{0};
  // Restore.
  std::atomic<uint64_t> restores_started{0};
  std::atomic<uint64_t> restores_finished{0};
  std::atomic<uint64_t> restore_tokens{0};             // tokens restored on every stage
  std::atomic<uint64_t> restore_bytes{0};              // bytes read from the pool, all stages
  std::atomic<uint64_t> restore_mapped_bytes{0};       // of which unpacked in place from a mapped segment
  std::atomic<uint64_t> restore_fallbacks{0};          // restores that gave back fewer tokens than planned
  std::atomic<uint64_t> restore_fallback_tokens{0};    // planned tokens the engine must compute instead
  std::atomic<uint64_t> restore_timeouts{0};           // fallbacks because the bounded wait ran out
  std::atomic<uint64_t> restore_rejected_queue_full{0};
  // Stage objects whose bytes did not match their writer's checksum (read into staging or
  // mapped in place): each ends its window's usable prefix, so the rest is computed.
  std::atomic<uint64_t> restore_corrupt_objects{0};
  // Save.
  std::atomic<uint64_t> saves_submitted{0};
  std::atomic<uint64_t> saves_finished{0};
  std::atomic<uint64_t> save_rejected_queue_full{0};   // back-pressure: save dropped, forward pass not stalled
  std::atomic<uint64_t> save_objects_put{0};
  std::atomic<uint64_t> save_objects_skipped{0};       // already in the pool
  std::atomic<uint64_t> save_objects_failed{0};
  std::atomic<uint64_t> save_bytes{0};
  // Wall-clock latencies: one lookup's round trip (all stages' keys at once); a restore from
  // Submit to its outcome (all stages done, or fallen back); and per stage, from Submit to
  // that stage's last window (restore_stage_seconds[s], stages past the last share the last).
  static constexpr size_t kStagesWithOwnHistogram = 8;
  Histogram lookup_seconds;
  // For lookup_miss_evicted: how long before the lookup the master evicted the chunk.
  static constexpr std::array<double, 9> kEvictionAgeBounds = {1, 10, 60, 300, 900, 1800, 3600, 7200, 86400};
  Histogram lookup_miss_evicted_age_seconds{kEvictionAgeBounds};
  Histogram restore_seconds;
  std::array<Histogram, kStagesWithOwnHistogram> restore_stage_seconds;
  Histogram& restore_stage(uint32_t stage) {
    return restore_stage_seconds[std::min<size_t>(stage, kStagesWithOwnHistogram - 1)];
  }

  // name -> value of the counters, names as above prefixed "kvpool_connector_".
  std::map<std::string, uint64_t> Snapshot() const;
  // Prometheus text of several connectors summed (a process's prefill instances): each counter
  // as kvpool_connector_<name>_total, the histograms as kvpool_connector_lookup_seconds,
  // _restore_seconds and _restore_stage_seconds{stage="s"} (stages with observations); `labels`
  // as in AppendMetric.
  static void AppendPrometheus(std::span<const ConnectorMetrics* const> connectors, std::string* out,
                               std::string_view labels = {});
};

}  // namespace kvpool::connector
