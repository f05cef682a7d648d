#include "connector/connector_metrics.h"

#include <fmt/format.h>

#include "common/prometheus_text.h"

namespace kvpool::connector {

std::map<std::string, uint64_t> ConnectorMetrics::Snapshot() const {
  std::map<std::string, uint64_t> m;
  auto add = [&m](const char* name, const std::atomic<uint64_t>& v) {
    m[std::string("kvpool_connector_") + name] = v.load(std::memory_order_relaxed);
  };
  add("lookups", lookups);
  add("lookup_hit_chunks", lookup_hit_chunks);
  add("lookup_hit_tokens", lookup_hit_tokens);
  add("lookup_partial_chunks", lookup_partial_chunks);
  add("lookup_unreachable_stages", lookup_unreachable_stages);
  add("lookup_miss_evicted", lookup_miss_evicted);
  add("lookup_miss_pending", lookup_miss_pending);
  add("lookup_miss_never_stored", lookup_miss_never_stored);
  add("lookup_miss_key_mismatch", lookup_miss_key_mismatch);
  add("restores_started", restores_started);
  add("restores_finished", restores_finished);
  add("restore_tokens", restore_tokens);
  add("restore_bytes", restore_bytes);
  add("restore_mapped_bytes", restore_mapped_bytes);
  add("restore_fallbacks", restore_fallbacks);
  add("restore_fallback_tokens", restore_fallback_tokens);
  add("restore_timeouts", restore_timeouts);
  add("restore_rejected_queue_full", restore_rejected_queue_full);
  add("restore_corrupt_objects", restore_corrupt_objects);
  add("saves_submitted", saves_submitted);
  add("saves_finished", saves_finished);
  add("save_rejected_queue_full", save_rejected_queue_full);
  add("save_objects_put", save_objects_put);
  add("save_objects_skipped", save_objects_skipped);
  add("save_objects_failed", save_objects_failed);
  add("save_bytes", save_bytes);
  return m;
}

void ConnectorMetrics::AppendPrometheus(std::span<const ConnectorMetrics* const> connectors, std::string* out,
                                        std::string_view labels) {
  std::map<std::string, uint64_t> sums;
  Histogram lookup, restore, evicted_age(kEvictionAgeBounds);
  std::array<Histogram, kStagesWithOwnHistogram> stages;
  for (const ConnectorMetrics* c : connectors) {
    for (const auto& [name, value] : c->Snapshot()) sums[name] += value;
    lookup.Add(c->lookup_seconds);
    evicted_age.Add(c->lookup_miss_evicted_age_seconds);
    restore.Add(c->restore_seconds);
    for (size_t s = 0; s < stages.size(); ++s) stages[s].Add(c->restore_stage_seconds[s]);
  }
  for (const auto& [name, value] : sums) {
    AppendMetric(out, name + "_total", "counter", "What the connector did (connector/connector_metrics.h).", value,
                 labels);
  }
  lookup.AppendTo(out, "kvpool_connector_lookup_seconds", "One prefix lookup's round trip to the masters.", labels);
  evicted_age.AppendTo(out, "kvpool_connector_lookup_miss_evicted_age_seconds",
                       "A lookup that stopped at a chunk its master evicted: how long before.", labels);
  restore.AppendTo(out, "kvpool_connector_restore_seconds",
                   "A restore from submit to its outcome (every stage done, or fallen back).", labels);
  const std::string stage_name = "kvpool_connector_restore_stage_seconds";
  AppendHeader(out, stage_name, "histogram", "A restore from submit to that stage's last window.");
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].count() == 0) continue;
    stages[s].AppendSeries(out, stage_name, JoinLabels(labels, fmt::format("stage=\"{}\"", s)));
  }
}

}  // namespace kvpool::connector
