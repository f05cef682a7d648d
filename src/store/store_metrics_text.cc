#include "store/store_metrics_text.h"

#include <fmt/format.h>

#include "common/prometheus_text.h"
#include "store/storage_service.h"

namespace kvpool::store {

void AppendStoreMetrics(const StorageService& store, std::string* out) {
  const std::string labels = fmt::format("store=\"{}\"", EscapeLabelValue(store.store_id()));
  const auto metric = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    AppendMetric(out, name, type, help, value, labels);
  };
  metric("kvpool_store_segment_bytes", "gauge", "Bytes of the store's segment.", uint64_t{store.memory().size()});
  metric("kvpool_store_mounted", "gauge", "1 while the master knows the segment, else 0.",
         uint64_t{store.segment_id() != 0});
  metric("kvpool_store_indexed_objects", "gauge", "Entries in the store's copy of its segment's index.",
         uint64_t{store.indexed_objects()});
  metric("kvpool_store_remounts_total", "counter", "Mounts after the master dropped the segment.", store.remounts());
  metric("kvpool_store_rejoins_total", "counter", "Segments given back with their index to a master that lost them.",
         store.rejoins());
  const TierMover* ssd = store.ssd();
  if (ssd == nullptr) return;
  const ssd::SsdTierStats tier = ssd->stats();
  const TierMoverStats moved = ssd->mover_stats();
  metric("kvpool_store_ssd_capacity_bytes", "gauge", "Bytes the SSD tier's slots hold for values.", tier.capacity_bytes);
  metric("kvpool_store_ssd_used_bytes", "gauge", "Bytes of values in the SSD tier.", tier.value_bytes);
  metric("kvpool_store_ssd_objects", "gauge", "Objects in the SSD tier.", tier.objects);
  metric("kvpool_store_ssd_hits_total", "counter", "SSD tier reads that found their object.", tier.hits);
  metric("kvpool_store_ssd_misses_total", "counter", "SSD tier reads of an absent object.", tier.misses);
  metric("kvpool_store_ssd_corrupt_total", "counter", "SSD objects whose bytes failed their checksum (dropped).",
         tier.corrupt);
  metric("kvpool_store_ssd_evicted_objects_total", "counter", "Objects the full SSD tier dropped.",
         tier.evicted_objects);
  metric("kvpool_store_ssd_restored_objects", "gauge", "Objects found on the tier's file when the store started.",
         tier.restored_objects);
  metric("kvpool_store_ssd_demotions_total", "counter", "Objects written from the segment into the SSD tier.",
         moved.demoted);
  metric("kvpool_store_ssd_demotion_failures_total", "counter", "Demotions the tier could not take.",
         moved.demote_failed);
  metric("kvpool_store_ssd_written_bytes_total", "counter", "Value bytes demoted into the SSD tier.",
         moved.demoted_bytes);
  metric("kvpool_store_ssd_write_seconds_total", "counter", "Seconds the SSD tier spent writing demotions.",
         moved.demote_seconds);
  metric("kvpool_store_ssd_promotions_total", "counter", "Objects loaded from the SSD tier into the segment.",
         moved.promoted);
  metric("kvpool_store_ssd_promotion_failures_total", "counter", "Loads the SSD tier could not serve (a miss).",
         moved.promote_failed);
  metric("kvpool_store_ssd_read_bytes_total", "counter", "Value bytes loaded from the SSD tier.",
         moved.promoted_bytes);
  metric("kvpool_store_ssd_read_seconds_total", "counter", "Seconds the SSD tier spent reading loads.",
         moved.promote_seconds);
}

}  // namespace kvpool::store
