// Eviction: LRU over eviction units (a group, or one ungrouped object).
//
// A pass scans the index once to rank units, then evicts them in order until it has freed
// enough. Ranking is done without holding more than one shard lock; each eviction then
// re-checks its unit under the locks of every shard it touches, so a unit that gained a
// lease, a pending member or a new member since the scan is skipped, never half-evicted.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "master/pool_metadata.h"

namespace kvpool::master {

struct PoolMetadata::EvictionCandidate {
  int64_t last_access_ms = 0;  // most recent access of any member
  bool pinned = false;         // any member pinned past now
  bool blocked = false;        // some member leased or pending: not evictable this pass
  bool is_group = false;
  std::string name;     // group name, or the key of an ungrouped object
  uint64_t put_id = 0;  // ungrouped only: the incarnation that was ranked
  size_t shard = 0;     // ungrouped only
};

namespace {

bool Evictable(const ObjectMeta& meta, int64_t now_ms) {
  return meta.state == ObjectState::kComplete && meta.lease_until_ms <= now_ms;
}

}  // namespace

std::vector<PoolMetadata::EvictionCandidate> PoolMetadata::CollectCandidates(int64_t now_ms) {
  std::vector<EvictionCandidate> candidates;
  std::unordered_map<std::string, size_t> group_slot;
  for (size_t i = 0; i < index_.shard_count(); ++i) {
    ObjectShard& shard = index_.shard(i);
    std::lock_guard lock(shard.mu);
    for (const auto& [key, meta] : shard.objects) {
      const bool pinned = meta.pin_until_ms > now_ms;
      if (meta.group.empty()) {
        if (!Evictable(meta, now_ms)) continue;
        EvictionCandidate& c = candidates.emplace_back();
        c.last_access_ms = meta.last_access_ms;
        c.pinned = pinned;
        c.name = key;
        c.put_id = meta.put_id;
        c.shard = i;
        continue;
      }
      auto [slot, inserted] = group_slot.try_emplace(meta.group, candidates.size());
      if (inserted) {
        EvictionCandidate& c = candidates.emplace_back();
        c.is_group = true;
        c.name = meta.group;
        c.last_access_ms = meta.last_access_ms;
      }
      EvictionCandidate& c = candidates[slot->second];
      c.last_access_ms = std::max(c.last_access_ms, meta.last_access_ms);
      c.pinned = c.pinned || pinned;
      c.blocked = c.blocked || !Evictable(meta, now_ms);
    }
  }
  std::erase_if(candidates, [](const EvictionCandidate& c) { return c.blocked; });
  // Unpinned before pinned; least recently used first within each.
  std::sort(candidates.begin(), candidates.end(),
            [](const EvictionCandidate& a, const EvictionCandidate& b) {
              if (a.pinned != b.pinned) return !a.pinned;
              return a.last_access_ms < b.last_access_ms;
            });
  return candidates;
}

uint64_t PoolMetadata::EvictLocked(uint64_t bytes, int64_t now_ms) {
  uint64_t freed = 0;
  if (bytes > 0) {
    for (const EvictionCandidate& candidate : CollectCandidates(now_ms)) {
      if (freed >= bytes) break;
      freed += candidate.is_group ? EvictGroup(candidate, now_ms) : EvictSingle(candidate, now_ms);
    }
  }
  eviction_passes_.fetch_add(1, std::memory_order_acq_rel);
  return freed;
}

uint64_t PoolMetadata::EvictSingle(const EvictionCandidate& candidate, int64_t now_ms) {
  std::vector<PlacedReplica> replicas;
  uint64_t bytes = 0;
  {
    ObjectShard& shard = index_.shard(candidate.shard);
    std::lock_guard lock(shard.mu);
    auto it = shard.objects.find(candidate.name);
    if (it == shard.objects.end() || it->second.put_id != candidate.put_id ||
        !it->second.group.empty() || !Evictable(it->second, now_ms)) {
      return 0;
    }
    bytes = it->second.length * it->second.replicas.size();
    replicas = EraseLocked(shard, candidate.name);
  }
  FreeReplicas(replicas);
  evicted_objects_.fetch_add(1, std::memory_order_relaxed);
  evicted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return bytes;
}

uint64_t PoolMetadata::EvictGroup(const EvictionCandidate& candidate, int64_t now_ms) {
  const GroupRegistry::Members members = groups_.MembersOf(candidate.name);
  if (members.empty()) return 0;

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
  if (groups_.MembersOf(candidate.name) != members) return 0;
  uint64_t bytes = 0;
  for (const auto& [key, put_id] : members) {
    ObjectShard& shard = index_.shard(index_.ShardOf(key));
    auto it = shard.objects.find(key);
    if (it == shard.objects.end() || it->second.put_id != put_id ||
        it->second.group != candidate.name || !Evictable(it->second, now_ms)) {
      return 0;
    }
    bytes += it->second.length * it->second.replicas.size();
  }
  std::vector<PlacedReplica> replicas;
  for (const auto& [key, put_id] : members) {
    auto erased = EraseLocked(index_.shard(index_.ShardOf(key)), key);
    replicas.insert(replicas.end(), std::make_move_iterator(erased.begin()),
                    std::make_move_iterator(erased.end()));
  }
  locks.clear();
  FreeReplicas(replicas);
  evicted_objects_.fetch_add(members.size(), std::memory_order_relaxed);
  evicted_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return bytes;
}

}  // namespace kvpool::master
