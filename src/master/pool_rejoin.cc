// Rejoin: a store that kept its segment's index gives it to a master that does not know the
// segment — a restarted master, or a standby that just became leader — and the master takes
// the objects back (part of PoolMetadata).
//
// Why what comes back is safe to serve (docs/architecture.md, invariant 8): the old master
// answered a put's start only once the store had the placement, and its end only once the
// store had the completion, so every range a client may have written is in the index, and
// every object a client was told is complete is complete there. A range the index calls free
// was never handed to a client whose write could still land, and no lease covers it (removed
// objects stay in the index, marked, until their lease ends). Leases themselves are not in
// the index: every object that comes back is treated as leased until the horizon the old
// master promised, so no bytes a reader may still hold are handed out before then.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "master/pool_metadata.h"

namespace kvpool::master {

Result<RejoinResult> PoolMetadata::RejoinSegment(SegmentInfo info,
                                                 std::span<const proto::IndexEntry* const> entries,
                                                 int64_t lease_horizon_unix_ms) {
  if (info.id == 0 || info.id >> 48) {
    return InvalidArgument(fmt::format("rejoin: segment id {} is not one a master hands out", info.id));
  }
  if (info.store_id.empty()) return InvalidArgument("rejoin: store_id is empty");
  if (info.size < options_.alignment) {
    return InvalidArgument(fmt::format("rejoin: segment size {} is below the {}-byte alignment",
                                       info.size, options_.alignment));
  }
  const int64_t now = clock_->NowMs();
  const auto started = std::chrono::steady_clock::now();  // for the rebuild-time metric only
  RejoinResult result;

  // Keep the entries that fit: inside the segment, aligned, not overlapping one before.
  std::vector<uint32_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return entries[a]->offset() < entries[b]->offset(); });
  std::vector<uint32_t> kept;
  std::vector<OffsetAllocator::Range> ranges;
  kept.reserve(entries.size());
  ranges.reserve(entries.size());
  uint64_t end = 0;
  for (uint32_t i : order) {
    const proto::IndexEntry& e = *entries[i];
    if (e.on_ssd()) continue;  // in the store's SSD tier, not the segment: TakeSsdObjects
    const uint64_t aligned = (e.length() + options_.alignment - 1) / options_.alignment * options_.alignment;
    if (!ValidatePut({e.key(), e.length(), {}}).ok() || e.offset() % options_.alignment != 0 ||
        e.offset() < end || aligned < e.length() || aligned > info.size ||
        e.offset() > info.size - aligned) {
      ++result.skipped;
      continue;
    }
    end = e.offset() + aligned;
    kept.push_back(i);
    ranges.push_back({e.offset(), e.length()});
  }

  auto segment = segments_.MountWithId(info, now);
  if (!segment) {
    return AlreadyExists(fmt::format("rejoin: segment {} is already mounted", info.id));
  }
  auto handles = segment->Restore(ranges);
  if (!handles) {
    if (segments_.Remove(info.id)) DropSegmentReplicas(*segment);
    return Internal(fmt::format("rejoin: the index of segment {} does not fit its allocator", info.id));
  }

  // Every object is leased until the old master's horizon (at least until now).
  const int64_t horizon = std::max(now, ClockMs(lease_horizon_unix_ms));
  // An object's recency is when its put ended (now, if the store did not say).
  auto recency_of = [&](const proto::IndexEntry& e) {
    return e.completed_unix_ms() > 0 ? ClockMs(e.completed_unix_ms()) : now;
  };
  uint64_t max_put_id = 0;
  std::vector<DeferredFree> held;
  std::vector<PendingPut> pending;
  for (size_t k = 0; k < kept.size(); ++k) {
    const proto::IndexEntry& e = *entries[kept[k]];
    PlacedReplica replica{segment, e.offset(), (*handles)[k]};
    max_put_id = std::max(max_put_id, e.put_id());
    if (e.removed()) {
      held.push_back({horizon, {std::move(replica)}, e.put_id()});
      continue;
    }
    ObjectShard& shard = index_.shard(index_.ShardOf(e.key()));
    std::lock_guard lock(shard.mu);
    auto [it, inserted] = shard.objects.try_emplace(e.key());
    ObjectMeta& meta = it->second;
    if (!inserted) {
      // (Only a segment object takes another copy; one moving to or from SSD has just one.)
      if (meta.put_id == e.put_id() && meta.length == e.length() && meta.tier == ObjectTier::kDram) {
        // Another copy of the same put, on another store: one object with both copies.
        meta.replicas.push_back(std::move(replica));
        if (e.complete() && meta.state != ObjectState::kComplete) {
          meta.state = ObjectState::kComplete;
          EnterEvictionOrderLocked(it->first, meta, recency_of(e), meta.lease_until_ms, now);
        }
        ++result.objects;
        continue;
      }
      if (meta.put_id > e.put_id()) {  // an older incarnation of the key: hold its bytes only
        held.push_back({horizon, {std::move(replica)}, e.put_id()});
        continue;
      }
      // This entry is the newer put: the one in the index gives way, its bytes held too.
      const int64_t until = std::max(horizon, meta.lease_until_ms);
      const uint64_t old_put_id = meta.put_id;
      auto old = EraseLocked(shard, e.key(), proto::IndexRecord::REMOVE);
      held.push_back({until, std::move(old), old_put_id});
      it = shard.objects.try_emplace(e.key()).first;
    }
    ObjectMeta& fresh = it->second;
    quotas_.Charge(NamespaceOf(e.key()), e.length());  // admitted once already: past the quota if need be
    fresh.length = e.length();
    fresh.checksum = e.checksum();
    fresh.replicas.push_back(std::move(replica));
    fresh.state = e.complete() ? ObjectState::kComplete : ObjectState::kPending;
    fresh.put_id = e.put_id();
    fresh.put_started_ms = ClockMs(e.put_started_unix_ms());
    fresh.pin_until_ms = e.pin_until_unix_ms() > 0 ? ClockMs(e.pin_until_unix_ms()) : 0;
    fresh.lease_until_ms = horizon;
    if (!e.group().empty()) fresh.group = groups_.Add(e.group(), it->first, fresh.put_id);
    if (fresh.state == ObjectState::kPending) {
      pending.push_back({it->first, fresh.put_id, fresh.put_started_ms});
    } else {
      // Ranked by when it completed, aside until the horizon: no pass looks at it before.
      EnterEvictionOrderLocked(it->first, fresh, recency_of(e), horizon, now);
    }
    ++result.objects;
  }
  // Pending puts go to the timeout sweep in start order, as BatchPutStart queues them.
  std::sort(pending.begin(), pending.end(),
            [](const PendingPut& a, const PendingPut& b) { return a.started_ms < b.started_ms; });
  for (PendingPut& p : pending) {
    ObjectShard& shard = index_.shard(index_.ShardOf(p.key));
    std::lock_guard lock(shard.mu);
    shard.pending.push_back(std::move(p));
  }
  result.held = held.size();
  if (!held.empty()) {
    std::lock_guard lock(deferred_mu_);
    std::move(held.begin(), held.end(), std::back_inserter(deferred_));
  }
  for (uint64_t seen = next_put_id_.load(); seen <= max_put_id &&
                                            !next_put_id_.compare_exchange_weak(seen, max_put_id + 1);) {
  }
  rejoined_segments_.fetch_add(1, std::memory_order_relaxed);
  rebuilt_objects_.fetch_add(result.objects, std::memory_order_relaxed);
  const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  rebuild_ns_.fetch_add(static_cast<uint64_t>(took.count()), std::memory_order_relaxed);
  result.seconds = std::chrono::duration<double>(took).count();
  result.info = segment->info();
  return result;
}

}  // namespace kvpool::master
