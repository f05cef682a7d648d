// ObjectIndex: key -> object metadata, split into shards by key hash so that lookups,
// puts and eviction on different keys do not serialise on one lock.
//
// The index is plain data: each shard is a mutex plus the maps it guards. PoolMetadata
// owns the rules (states, leases, eviction); it locks shards directly. When it needs
// several shards at once it locks them in ascending index order.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "master/eviction_lru.h"
#include "master/key_hash.h"
#include "master/replica_list.h"

namespace kvpool::master {

enum class ObjectState : uint8_t {
  kPending,   // BatchPutStart allocated space; writers are filling it; invisible to readers
  kComplete,  // BatchPutEnd arrived; readable
};

// Where a complete object's bytes are (pool_tiering.cc). Demoting and promoting objects are
// out of the eviction order: their bytes are moving between the segment and the store's SSD.
enum class ObjectTier : uint8_t {
  kDram,       // in the segment, at its copies' offsets
  kDemoting,   // still in the segment (readable), being copied to the store's SSD tier
  kSsd,        // only in the SSD tier of its one copy's store; the copy holds no segment bytes
  kPromoting,  // being loaded from SSD into the segment at its one copy's offset
};

// Kept small: a pool holds millions. The key lives in the map, the group name once in the
// GroupRegistry, the recency in the EvictionLru.
struct ObjectMeta {
  uint64_t length = 0;
  uint64_t checksum = 0;  // the writer's (common/checksum.h); readers check their bytes against it
  ReplicaList replicas;  // on distinct segments
  // The group's name, owned by the GroupRegistry for as long as this object is a member;
  // null => the object is its own eviction unit.
  const std::string* group = nullptr;
  uint64_t put_id = 0;       // unique per PutStart; tells a re-put key from the old one
  int64_t put_started_ms = 0;
  int64_t pin_until_ms = 0;    // soft pin: evicted after unpinned candidates until then
  int64_t lease_until_ms = 0;  // never evicted or freed before this
  // Its unit in the eviction order, from the put's end (a pending put has none).
  EvictionLru::UnitId lru_unit = EvictionLru::kNoUnit;
  ObjectState state = ObjectState::kPending;
  ObjectTier tier = ObjectTier::kDram;

  std::string_view group_name() const { return group ? std::string_view(*group) : std::string_view(); }
};

// A put that was pending when recorded; checked by the put-timeout sweep in start order.
struct PendingPut {
  std::string key;
  uint64_t put_id = 0;
  int64_t started_ms = 0;
};

struct ObjectShard {
  std::mutex mu;
  std::unordered_map<std::string, ObjectMeta, KeyHash, KeyEqual> objects;  // guarded by mu
  std::deque<PendingPut> pending;  // guarded by mu; may hold entries already ended
  uint64_t hits = 0;               // guarded by mu
  uint64_t misses = 0;             // guarded by mu
};

class ObjectIndex {
 public:
  // REQUIRES: shard_count > 0.
  explicit ObjectIndex(size_t shard_count);

  ObjectIndex(const ObjectIndex&) = delete;
  ObjectIndex& operator=(const ObjectIndex&) = delete;

  size_t shard_count() const { return shards_.size(); }
  static HashedKey Hash(std::string_view key) { return {key, KeyHash{}(key)}; }
  size_t ShardOf(const HashedKey& key) const {
    // High bits pick the shard so they stay independent of the low bits maps bucket by.
    return (key.hash >> 40) % shards_.size();
  }
  size_t ShardOf(std::string_view key) const { return ShardOf(Hash(key)); }
  // Shards are internally synchronised, so a const index still hands out lockable shards.
  ObjectShard& shard(size_t index) const { return *shards_[index]; }

 private:
  std::vector<std::unique_ptr<ObjectShard>> shards_;
};

}  // namespace kvpool::master
