// Eviction: LRU over eviction units (a group, or one ungrouped object).
//
// A namespace at its quota evicts only its own units: the pass walks the same order and
// passes over other namespaces' units (it may visit many; one order per namespace would make
// it cost only what it evicts).
//
// The order lives in EvictionLru, kept up to date as objects complete, are read and go, so a
// pass looks only at the units it evicts and those it must pass over. It checks units out in
// order, a few at a time (holding no shard lock), and tries each under the locks of every
// shard holding a member, in ascending order: a unit that gained a lease, a pending member or
// a new member since it was ranked is given back, never half-evicted. One blocked by leases
// alone is deferred until the last of them ends, so later passes do not meet it again
// before then; others are given back when the pass ends, so this pass does not.
#include <fmt/format.h>

#include <algorithm>

#include "master/pool_metadata.h"

namespace kvpool::master {

namespace {

// The pass checks out 1, 2, 4, ... units at a time: a pass that needs one unit looks at one,
// one that needs many does not take the order's lock per unit.
constexpr size_t kMaxCheckOut = 64;

}  // namespace

uint64_t PoolMetadata::EvictLocked(uint64_t bytes, int64_t now_ms, std::optional<std::string_view> only_namespace,
                                   bool demote) {
  uint64_t freed = 0;
  std::vector<EvictionLru::Candidate> passed_over;  // given back once the pass is done
  for (size_t batch_size = 1; freed < bytes; batch_size = std::min(batch_size * 2, kMaxCheckOut)) {
    std::vector<EvictionLru::Candidate> batch = lru_.CheckOut(batch_size, now_ms);
    if (batch.empty()) break;
    size_t i = 0;
    for (; i < batch.size() && freed < bytes && !(demote && DemotionQueueFull()); ++i) {
      // A group's name and its members' keys begin with the same namespace (the connector's do).
      if (only_namespace && NamespaceOf(batch[i].name) != *only_namespace) {
        passed_over.push_back(std::move(batch[i]));
        continue;
      }
      const EvictionAttempt attempt =
          batch[i].is_group ? EvictGroup(batch[i], now_ms, demote) : EvictSingle(batch[i], now_ms, demote);
      freed += attempt.freed_bytes;
      if (attempt.freed_bytes > 0) continue;
      if (attempt.blocked_until_ms > now_ms) {
        lru_.GiveBack(batch[i], attempt.blocked_until_ms, now_ms);
      } else {
        passed_over.push_back(std::move(batch[i]));
      }
    }
    for (; i < batch.size(); ++i) lru_.GiveBack(batch[i], 0, now_ms);  // not tried
    if (demote && DemotionQueueFull()) break;
  }
  for (const auto& candidate : passed_over) lru_.GiveBack(candidate, 0, now_ms);
  eviction_passes_.fetch_add(1, std::memory_order_acq_rel);
  return freed;
}

PoolMetadata::EvictionAttempt PoolMetadata::EvictSingle(const EvictionLru::Candidate& candidate,
                                                        int64_t now_ms, bool demote) {
  std::vector<PlacedReplica> replicas;
  uint64_t bytes = 0;
  {
    ObjectShard& shard = index_.shard(index_.ShardOf(candidate.name));
    std::lock_guard lock(shard.mu);
    auto it = shard.objects.find(candidate.name);
    // Gone or put again since it was ranked: its unit has ended, nothing to give back.
    if (it == shard.objects.end() || it->second.put_id != candidate.put_id ||
        it->second.lru_unit != candidate.unit || it->second.group != nullptr ||
        it->second.state != ObjectState::kComplete) {
      return {};
    }
    if (it->second.lease_until_ms > now_ms) return {0, it->second.lease_until_ms};
    bytes = it->second.length * it->second.replicas.size();
    if (demote && DemotableLocked(it->second)) {
      DemoteLocked(it->first, it->second, now_ms, /*group_members=*/0);
      return {bytes, 0};
    }
    replicas = EraseLocked(shard, candidate.name);
  }
  FreeReplicas(replicas);
  evicted_keys_.Remember(candidate.name, now_ms);
  evicted_objects_.fetch_add(1, std::memory_order_relaxed);
  evicted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return {bytes, 0};
}

PoolMetadata::EvictionAttempt PoolMetadata::EvictGroup(const EvictionLru::Candidate& candidate,
                                                       int64_t now_ms, bool demote) {
  const GroupRegistry::Members members = groups_.MembersOf(candidate.name);
  if (members.empty()) return {};

  // Lock every shard holding a member, in ascending order (the global lock order).
  std::vector<size_t> shard_ids;
  shard_ids.reserve(members.size());
  for (const auto& [key, put_id] : members) shard_ids.push_back(index_.ShardOf(key));
  std::sort(shard_ids.begin(), shard_ids.end());
  shard_ids.erase(std::unique(shard_ids.begin(), shard_ids.end()), shard_ids.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(shard_ids.size());
  for (size_t id : shard_ids) locks.emplace_back(index_.shard(id).mu);

  // A member added since we read the list may live in a shard we do not hold: give up on
  // the group this pass rather than evict it partly.
  if (groups_.MembersOf(candidate.name) != members) return {};
  uint64_t bytes = 0;
  bool pending = false;
  int64_t leased_until = 0;
  for (const auto& [key, put_id] : members) {
    ObjectShard& shard = index_.shard(index_.ShardOf(key));
    auto it = shard.objects.find(key);
    if (it == shard.objects.end() || it->second.put_id != put_id ||
        it->second.group_name() != candidate.name) {
      return {};
    }
    const ObjectMeta& meta = it->second;
    // Members moving between tiers end soon, like pending ones; those on SSD hold no bytes here.
    if (meta.state != ObjectState::kComplete || meta.tier == ObjectTier::kDemoting ||
        meta.tier == ObjectTier::kPromoting) {
      pending = true;
      continue;
    }
    if (meta.tier == ObjectTier::kSsd) continue;
    if (meta.lru_unit != candidate.unit) return {};  // the group ended and began again
    leased_until = std::max(leased_until, meta.lease_until_ms);
    bytes += meta.length * meta.replicas.size();
    demote = demote && DemotableLocked(meta);
  }
  // A pending member ends at its put's end or timeout, not at a known time: no deferral.
  if (pending) return {};
  if (leased_until > now_ms) return {0, leased_until};
  if (demote) {  // every member in the segment can go to SSD: the group moves there whole
    for (const auto& [key, put_id] : members) {
      auto it = index_.shard(index_.ShardOf(key)).objects.find(key);
      if (it->second.tier == ObjectTier::kDram) {
        DemoteLocked(it->first, it->second, now_ms, static_cast<uint32_t>(members.size()));
      }
    }
    return {bytes, 0};
  }
  // Dropped whole: members already on SSD go too.
  std::vector<PlacedReplica> replicas;
  for (const auto& [key, put_id] : members) {
    evicted_keys_.Remember(key, now_ms);
    auto erased = EraseLocked(index_.shard(index_.ShardOf(key)), key);
    replicas.insert(replicas.end(), std::make_move_iterator(erased.begin()),
                    std::make_move_iterator(erased.end()));
  }
  locks.clear();
  FreeReplicas(replicas);
  evicted_objects_.fetch_add(members.size(), std::memory_order_relaxed);
  evicted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return {bytes, 0};
}

}  // namespace kvpool::master
