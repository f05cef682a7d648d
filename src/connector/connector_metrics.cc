#include "connector/connector_metrics.h"

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

}  // namespace kvpool::connector
