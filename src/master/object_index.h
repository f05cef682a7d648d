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

#include "master/replica_placement.h"

namespace kvpool::master {

enum class ObjectState : uint8_t {
  kPending,   // BatchPutStart allocated space; writers are filling it; invisible to readers
  kComplete,  // BatchPutEnd arrived; readable
};

struct ObjectMeta {
  uint64_t length = 0;
  std::vector<PlacedReplica> replicas;  // on distinct segments
  ObjectState state = ObjectState::kPending;
  std::string group;         // "" => the object is its own eviction unit
  uint64_t put_id = 0;       // unique per PutStart; tells a re-put key from the old one
  int64_t put_started_ms = 0;
  int64_t pin_until_ms = 0;    // soft pin: evicted after unpinned candidates until then
  int64_t lease_until_ms = 0;  // never evicted or freed before this
  int64_t last_access_ms = 0;
};

// A key with its hash computed once: hot paths need the hash twice (shard, then bucket).
struct HashedKey {
  std::string_view key;
  size_t hash = 0;
};

// Hash used both to pick a shard and inside each shard's map. Transparent, so lookups by
// string_view or HashedKey do not build a std::string.
struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view key) const;
  size_t operator()(const HashedKey& key) const { return key.hash; }
};
struct KeyEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  bool operator()(const HashedKey& a, std::string_view b) const { return a.key == b; }
  bool operator()(std::string_view a, const HashedKey& b) const { return a == b.key; }
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
