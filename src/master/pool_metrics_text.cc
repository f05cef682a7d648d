#include "master/pool_metrics_text.h"

#include <fmt/format.h>

#include "common/prometheus_text.h"

namespace kvpool::master {



void AppendPoolMetrics(const PoolStats& stats, uint32_t part, std::string* out) {
  auto metric = [out](std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    AppendMetric(out, name, type, help, value);
  };
  metric("kvpool_master_objects", "gauge", "Objects in the index (pending and complete).",
         stats.objects);
  metric("kvpool_master_groups", "gauge", "Named eviction groups with members.", stats.groups);
  metric("kvpool_master_eviction_units", "gauge",
         "Units in the eviction order (groups and ungrouped complete objects).",
         stats.eviction_units);
  metric("kvpool_master_retained_units", "gauge",
         "Eviction units a router's retention hint keeps over units without a pin (BatchRetain).",
         stats.retained_units);
  metric("kvpool_master_displaced_retentions_total", "counter",
         "Retentions ended because the bound was reached and one expected to be read sooner took their place.",
         stats.displaced_retentions);
  metric("kvpool_master_eviction_units_visited_total", "counter",
         "Units eviction passes looked at (evicted, deferred or passed over).",
         stats.eviction_units_visited);
  metric("kvpool_master_eviction_units_reranked_total", "counter",
         "Units eviction passes moved back because they were read after they were ranked.",
         stats.eviction_units_reranked);
  metric("kvpool_master_used_bytes", "gauge", "Bytes allocated across all segments.",
         stats.used_bytes);
  metric("kvpool_master_capacity_bytes", "gauge", "Bytes of all mounted segments.",
         stats.capacity_bytes);
  metric("kvpool_master_segments", "gauge", "Mounted segments.", stats.segments.size());
  metric("kvpool_master_evicted_objects_total", "counter", "Objects evicted.",
         stats.evicted_objects);
  metric("kvpool_master_evicted_bytes_total", "counter", "Bytes (all copies) evicted.",
         stats.evicted_bytes);
  metric("kvpool_master_hits_total", "counter", "BatchGetReplicas keys found complete.",
         stats.hits);
  metric("kvpool_master_misses_total", "counter", "BatchGetReplicas keys absent or pending.",
         stats.misses);
  metric("kvpool_master_misses_evicted_total", "counter",
         "Of those, keys this master evicted (and still remembers evicting); the rest were never stored "
         "here, were removed, were pending, or were evicted longer ago than it remembers.",
         stats.misses_evicted);
  metric("kvpool_master_rejoined_segments_total", "counter",
         "Segments taken back from the index their store kept (after a master restart or failover).",
         stats.rejoined_segments);
  metric("kvpool_master_rebuilt_objects_total", "counter",
         "Objects those rejoins brought back into the index.", stats.rebuilt_objects);
  out->append(fmt::format(
      "# HELP kvpool_master_rebuild_seconds_total Time spent rebuilding the index from rejoining "
      "stores.\n# TYPE kvpool_master_rebuild_seconds_total counter\n"
      "kvpool_master_rebuild_seconds_total {:.6f}\n",
      stats.rebuild_seconds));

  const TierStats& t = stats.tiers;
  metric("kvpool_master_ssd_used_bytes", "gauge", "Value bytes in the stores' SSD tiers.", t.ssd_used_bytes);
  metric("kvpool_master_ssd_capacity_bytes", "gauge", "Bytes of the stores' SSD tiers.", t.ssd_capacity_bytes);
  metric("kvpool_master_ssd_objects", "gauge", "Objects in the stores' SSD tiers.", t.ssd_objects);
  metric("kvpool_master_demoting_bytes", "gauge", "Bytes on their way from segments to SSD.", t.demoting_bytes);
  metric("kvpool_master_demotions_total", "counter", "Objects demoted to SSD instead of evicted.", t.demotions);
  metric("kvpool_master_demotion_failures_total", "counter", "Demotions a store could not write (dropped instead).",
         t.demotion_failures);
  metric("kvpool_master_promotions_total", "counter", "SSD objects a read loaded back into a segment.", t.promotions);
  metric("kvpool_master_promotion_failures_total", "counter",
         "SSD objects a store could not load (gone or corrupt): misses.", t.promotion_failures);
  metric("kvpool_master_ssd_evictions_total", "counter", "Objects a full SSD tier dropped.", t.ssd_evictions);
  metric("kvpool_master_ssd_hits_total", "counter", "Lookups that found the object on SSD.", t.ssd_hits);

  auto per_segment = [&](std::string_view name, std::string_view help, auto value_of) {
    AppendHeader(out, name, "gauge", help);
    for (const auto& s : stats.segments) {
      out->append(fmt::format("{}{{segment=\"{}\",store=\"{}\"}} {}\n", name, s.info.id,
                              EscapeLabelValue(s.info.store_id), value_of(s)));
    }
  };
  per_segment("kvpool_master_segment_used_bytes", "Bytes allocated in the segment.",
              [](const SegmentStats& s) { return s.used_bytes; });
  per_segment("kvpool_master_segment_capacity_bytes", "Size of the segment.",
              [](const SegmentStats& s) { return s.info.size; });
  per_segment("kvpool_master_segment_objects", "Object copies stored in the segment.",
              [](const SegmentStats& s) { return s.objects; });
  per_segment("kvpool_master_segment_ssd_used_bytes", "Value bytes in the segment's store's SSD tier.",
              [](const SegmentStats& s) { return s.ssd_used_bytes; });

  // One series per namespace of `list` in this part: quotas' usage (gauges) or lookups (counters).
  auto per_namespace = [&](std::string_view name, std::string_view type, std::string_view help, const auto& list,
                           auto value_of) {
    AppendHeader(out, name, type, help);
    for (const auto& n : list) {
      out->append(
          fmt::format("{}{{namespace=\"{}\",part=\"{}\"}} {}\n", name, EscapeLabelValue(n.name), part, value_of(n)));
    }
  };
  per_namespace("kvpool_master_namespace_used_bytes", "gauge",
                "Value bytes of the namespace's objects (namespaces with a quota).", stats.namespaces,
                [](const NamespaceUsage& n) { return n.used_bytes; });
  per_namespace("kvpool_master_namespace_quota_bytes", "gauge", "The namespace's byte quota.", stats.namespaces,
                [](const NamespaceUsage& n) { return n.quota_bytes; });
  per_namespace("kvpool_master_namespace_hits_total", "counter", "Keys looked up and found, by namespace.",
                stats.namespace_hits, [](const NamespaceHitCount& n) { return n.hits; });
  per_namespace("kvpool_master_namespace_misses_total", "counter",
                "Keys looked up and not found (or not ready), by namespace.", stats.namespace_hits,
                [](const NamespaceHitCount& n) { return n.misses; });
}

void AppendLeadershipMetrics(const LeadershipFigures& f, std::string* out) {
  out->append(fmt::format(
      "# HELP kvpool_master_leader 1 while this master serves its part, 0 for a standby.\n"
      "# TYPE kvpool_master_leader gauge\nkvpool_master_leader {}\n"
      "# HELP kvpool_master_term The etcd election term this master last won (0: never, or no etcd).\n"
      "# TYPE kvpool_master_term gauge\nkvpool_master_term {}\n"
      "# HELP kvpool_master_elections_won_total Elections this master won.\n"
      "# TYPE kvpool_master_elections_won_total counter\nkvpool_master_elections_won_total {}\n"
      "# HELP kvpool_master_failovers_total Elections won by taking the part over from another master.\n"
      "# TYPE kvpool_master_failovers_total counter\nkvpool_master_failovers_total {}\n",
      f.leading ? 1 : 0, f.term, f.elections_won, f.failovers));
}

}  // namespace kvpool::master
