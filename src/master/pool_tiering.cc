// The SSD tier under the pool (issue 17; part of PoolMetadata): objects move between a store's
// segment and that store's SSD tier, and the master always knows which one holds them.
//
//   demote   a background eviction pass (RunMaintenance, above the high watermark) takes a
//            unit whose objects can go to SSD out of the eviction order (kDemoting) and
//            journals DEMOTE; the store copies the bytes to its tier, checking them against
//            the writer's checksum, and reports DEMOTED (the segment bytes are then freed, or
//            when the last lease on them ends) or DEMOTE_FAILED (dropped, as eviction would).
//            At most max_demoting_bytes are on their way at once.
//   read     a lookup that finds an object on SSD answers where its value lies in the store's
//            tier file (the store reported it with DEMOTED, or announced it at a mount), and
//            journals TOUCH_SSD so the store's tier counts it as used. The client reads the
//            file (transfer: a tier read) and checks the bytes against the checksum: the store
//            does not pin the slot, and a slot it reused meanwhile is a checksum mismatch,
//            never bytes served. With promote_on_hit instead:
//   promote  a lookup that finds an object on SSD allocates a range of its store's segment,
//            journals PROMOTE and waits: the store loads the object there (checked against
//            its checksum) before it confirms the record, or reports PROMOTE_FAILED with the
//            confirmation. Confirmed, the object is a segment object again (kDram), answered
//            like any other: every read path — shm, tcp, the restore mapping the segment —
//            works unchanged. The store keeps one copy: the SSD copy goes once loaded.
//   evict    a full SSD tier evicts its least recently used groups itself and reports
//            SSD_EVICTED; removing or dropping an SSD object journals DROP_SSD.
//
// Why no reader sees wrong bytes: a demotion only reads segment bytes, and keeps them only when
// they hash to the writer's checksum, so a range freed and rewritten meanwhile is never stored
// as the object; a promotion writes into a range no other object holds, before its record is
// confirmed, and a later PLACE over that range is confirmed (so written by a client) only after
// the store applied everything before it, the load included.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "master/journal_waits.h"
#include "master/pool_internal.h"
#include "master/pool_metadata.h"

namespace kvpool::master {

using internal::EntryRecord;
using internal::RecordOf;

bool PoolMetadata::DemotableLocked(const ObjectMeta& meta) {
  if (meta.state != ObjectState::kComplete || meta.tier != ObjectTier::kDram || meta.replicas.size() != 1) {
    return false;
  }
  const uint64_t slot = meta.replicas.begin()->segment->ssd_max_value_bytes();
  return slot > 0 && meta.length <= slot && meta.replicas.begin()->segment->alive();
}

bool PoolMetadata::DemotionQueueFull() const {
  return demoting_bytes_.load(std::memory_order_relaxed) >= options_.max_demoting_bytes;
}

void PoolMetadata::DemoteLocked(const std::string& key, ObjectMeta& meta, int64_t now_ms, uint32_t group_members) {
  if (meta.lru_unit != EvictionLru::kNoUnit) lru_.Leave(meta.lru_unit, meta.pin_until_ms, now_ms);
  meta.lru_unit = EvictionLru::kNoUnit;
  meta.tier = ObjectTier::kDemoting;
  demoting_bytes_.fetch_add(meta.length, std::memory_order_relaxed);
  const PlacedReplica& replica = *meta.replicas.begin();
  proto::IndexRecord record = EntryRecord(proto::IndexRecord::DEMOTE, key, meta, replica.offset);
  record.mutable_entry()->set_group_members(group_members);
  Journal(replica, std::move(record));
}

void PoolMetadata::ApplyTierReports(uint64_t segment_id,
                                    const google::protobuf::RepeatedPtrField<proto::TierReport>& reports) {
  auto segment = segments_.Find(segment_id);
  if (!segment || !segment->journal()) return;
  const int64_t now = clock_->NowMs();
  for (const proto::TierReport& report : reports) {
    if (ValidateKey(report.key()).ok() == false) continue;
    std::vector<PlacedReplica> to_free;
    std::optional<DeferredFree> deferred;
    std::string group;  // a failed demotion drops the rest of its group too
    uint64_t arrived_bytes = 0;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(report.key()));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(report.key());
      // The object the report is about: on this segment, of that put (a store's eviction names
      // only the key: its tier keeps no put ids, and holds one object per key).
      const bool here = it != shard.objects.end() && !it->second.replicas.empty() &&
                        it->second.replicas.begin()->segment == segment;
      const bool same = here && (it->second.put_id == report.put_id() || report.kind() == proto::TierReport::SSD_EVICTED);
      ObjectMeta* meta = same ? &it->second : nullptr;
      switch (report.kind()) {
        case proto::TierReport::DEMOTED:
          if (meta && meta->tier == ObjectTier::kDemoting) {
            // On SSD from now on; the segment bytes go once no lease covers them.
            std::vector<PlacedReplica> dram = meta->replicas.Take();
            meta->replicas.push_back(PlacedReplica{segment, report.ssd_offset(), 0});  // in the file
            meta->tier = ObjectTier::kSsd;
            arrived_bytes = meta->length;  // no longer on its way once its segment bytes are free
            segment->AddSsdObject(static_cast<int64_t>(meta->length), 1);
            demotions_.fetch_add(1, std::memory_order_relaxed);
            if (meta->lease_until_ms > now) {
              for (const auto& r : dram) Journal(r, RecordOf(proto::IndexRecord::REMOVE, r.offset, meta->put_id));
              deferred = DeferredFree{meta->lease_until_ms, std::move(dram), meta->put_id};
            } else {
              for (const auto& r : dram) Journal(r, RecordOf(proto::IndexRecord::DROP, r.offset, meta->put_id));
              to_free = std::move(dram);
            }
          } else if (!(meta && meta->tier == ObjectTier::kSsd)) {
            // Removed, dropped or put again meanwhile: the store must not keep the copy.
            segment->journal()->Append(internal::DropSsdRecord(report.key(), report.put_id()));
          }
          break;
        case proto::TierReport::DEMOTE_FAILED:
          if (meta && meta->tier == ObjectTier::kDemoting) {
            demotion_failures_.fetch_add(1, std::memory_order_relaxed);
            evicted_objects_.fetch_add(1, std::memory_order_relaxed);
            evicted_bytes_.fetch_add(meta->length, std::memory_order_relaxed);
            evicted_keys_.Remember(report.key(), now);
            group = std::string(meta->group_name());
            to_free = EraseLocked(shard, report.key());
          }
          break;
        case proto::TierReport::PROMOTE_FAILED:
          if (meta && meta->tier == ObjectTier::kPromoting) {
            promotion_failures_.fetch_add(1, std::memory_order_relaxed);
            to_free = EraseLocked(shard, report.key());
          }
          break;
        case proto::TierReport::SSD_EVICTED:
          if (meta && meta->tier == ObjectTier::kSsd) {
            ssd_evictions_.fetch_add(1, std::memory_order_relaxed);
            evicted_keys_.Remember(report.key(), now);
            to_free = EraseLocked(shard, report.key());
          }
          break;
        default:
          break;
      }
    }
    FreeReplicas(to_free);
    // Only now: the background pass counts demoting bytes as freed, so it must not see them
    // leave the queue before they left the segment.
    demoting_bytes_.fetch_sub(arrived_bytes, std::memory_order_relaxed);
    if (deferred) {
      std::lock_guard lock(deferred_mu_);
      deferred_.push_back(std::move(*deferred));
    }
    if (!group.empty()) {
      // A group is whole in some tier or gone: what is left of it is dropped too.
      for (const auto& [key, put_id] : groups_.MembersOf(group)) {
        std::vector<PlacedReplica> freed;
        {
          ObjectShard& shard = index_.shard(index_.ShardOf(key));
          std::lock_guard lock(shard.mu);
          auto it = shard.objects.find(key);
          if (it == shard.objects.end() || it->second.put_id != put_id ||
              it->second.state != ObjectState::kComplete || it->second.tier == ObjectTier::kPromoting) {
            continue;
          }
          evicted_keys_.Remember(key, now);
          freed = EraseLocked(shard, key);
        }
        FreeReplicas(freed);
      }
    }
  }
}

uint64_t PoolMetadata::TakeSsdObjects(uint64_t segment_id, std::span<const proto::IndexEntry* const> entries) {
  auto segment = segments_.Find(segment_id);
  if (!segment || segment->ssd_max_value_bytes() == 0) return 0;
  const int64_t now = clock_->NowMs();
  uint64_t taken = 0;
  for (const proto::IndexEntry* e : entries) {
    if (!e->on_ssd() || !ValidatePut({e->key(), e->length(), {}}).ok() ||
        e->length() > segment->ssd_max_value_bytes()) {
      continue;
    }
    ObjectShard& shard = index_.shard(index_.ShardOf(e->key()));
    std::lock_guard lock(shard.mu);
    auto [it, inserted] = shard.objects.try_emplace(e->key());
    if (!inserted) {
      // The pool has the key already (a rejoin's segment copy, another store's): that copy
      // stands, and the store drops its own, so no older copy outlives it on the file.
      segment->journal()->Append(internal::DropSsdRecord(e->key(), 0));
      continue;
    }
    ObjectMeta& meta = it->second;
    quotas_.Charge(NamespaceOf(e->key()), e->length());  // admitted once already
    meta.length = e->length();
    meta.checksum = e->checksum();
    meta.replicas.push_back(PlacedReplica{segment, e->offset(), 0});  // where it lies in the tier's file
    meta.state = ObjectState::kComplete;
    meta.tier = ObjectTier::kSsd;
    // A fresh put id: the store's SSD tier keeps none, and one from the entry could be a
    // segment entry's of another store (rejoin merges copies of one put by id).
    meta.put_id = next_put_id_.fetch_add(1, std::memory_order_relaxed);
    meta.put_started_ms = now;
    if (!e->group().empty()) meta.group = groups_.Add(e->group(), it->first, meta.put_id);
    segment->AddSsdObject(static_cast<int64_t>(meta.length), 1);
    ++taken;
  }
  return taken;
}

void PoolMetadata::PromoteForRead(std::span<const std::string_view> keys, std::span<const SsdRead> reads,
                                  int64_t lease_until_ms, BatchGetResult* out,
                                  std::vector<std::shared_ptr<Segment>>* referenced) {
  struct Load {
    const SsdRead* read;
    PlacedReplica replica;
  };
  std::vector<Load> loads;
  JournalWaits waits;
  for (const SsdRead& read : reads) {
    ssd_hits_.fetch_add(1, std::memory_order_relaxed);
    GetResult& result = out->results[read.index];
    const std::shared_ptr<Segment> only[] = {read.segment};
    auto placed = PlaceReplicas(only, read.length, 1);
    for (int round = 0; !placed.ok() && round < 4; ++round) {
      EvictAtLeast(read.length);
      placed = PlaceReplicas(only, read.length, 1);
    }
    if (!placed.ok()) {
      result.status = NoSpace(fmt::format("key on SSD, but its store's segment has no room to load it ({})",
                                          placed.status().message()));
      continue;
    }
    bool started = false;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(keys[read.index]));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(keys[read.index]);
      if (it != shard.objects.end() && it->second.put_id == read.put_id && it->second.tier == ObjectTier::kSsd &&
          read.segment->alive()) {
        ObjectMeta& meta = it->second;
        read.segment->AddSsdObject(-static_cast<int64_t>(meta.length), -1);
        meta.tier = ObjectTier::kPromoting;
        meta.replicas.Assign({(*placed)[0]});
        waits.Note(read.segment,
                   Journal((*placed)[0], EntryRecord(proto::IndexRecord::PROMOTE, it->first, meta, (*placed)[0].offset)));
        loads.push_back({&read, (*placed)[0]});
        started = true;
      }
    }
    if (!started) {
      FreeReplicas(*placed);
      result.status = NotFound("key left the SSD tier while being looked up");
    }
  }
  const auto failed = waits.Wait(std::chrono::milliseconds(options_.index_sync_timeout_ms));
  const int64_t now = clock_->NowMs();
  for (const Load& load : loads) {
    GetResult& result = out->results[load.read->index];
    const std::string_view key = keys[load.read->index];
    std::vector<PlacedReplica> freed;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(key));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(key);
      const bool mine = it != shard.objects.end() && it->second.put_id == load.read->put_id &&
                        it->second.tier == ObjectTier::kPromoting;
      if (!mine) {
        // PROMOTE_FAILED erased it (gone from SSD, or its bytes no longer matched): a miss.
        result.status = NotFound(fmt::format("key {} could not be loaded from SSD", key.substr(0, 64)));
      } else if (failed.count(load.read->segment->id()) != 0) {
        result.status = Unavailable("the store holding the object on SSD did not load it in time");
        freed = EraseLocked(shard, key);
      } else {
        ObjectMeta& meta = it->second;
        meta.tier = ObjectTier::kDram;
        meta.lease_until_ms = std::max(meta.lease_until_ms, lease_until_ms);
        EnterEvictionOrderLocked(it->first, meta, now, 0, now);
        promotions_.fetch_add(1, std::memory_order_relaxed);
        result.status = Status::Ok();
        internal::AnswerWith(meta, result, referenced);
      }
    }
    FreeReplicas(freed);
  }
}

}  // namespace kvpool::master
