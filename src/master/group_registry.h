// GroupRegistry: group name -> the keys put under it.
//
// Eviction treats a group as one unit: it must find every member, including members in
// object shards it has not looked at. Membership is tagged with the member's put_id so a
// late removal of an old incarnation of a key cannot drop a newer one.
//
// Memory: the registry holds each group's name once, and members as views of the index's
// own keys (not copies). Callers keep a member's key alive until they Remove it — the index
// removes a member before it erases the object — and may keep the name Add returns until
// then (ObjectMeta::group).
//
// Thread-safe (sharded by group name). Lock order: a caller may hold object-shard locks
// when calling in; the registry never calls out while holding its own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "master/key_hash.h"

namespace kvpool::master {

class GroupRegistry {
 public:
  using Members = std::vector<std::pair<std::string, uint64_t>>;  // (key, put_id), sorted

  explicit GroupRegistry(size_t shard_count = 16);

  // Adds `key` to `group`; returns the registry's copy of the group's name, alive until the
  // group's last member is removed. REQUIRES: `key` outlives the membership.
  const std::string* Add(std::string_view group, const std::string& key, uint64_t put_id);
  // No-op unless `key` is a member with this put_id. Forgets the group once empty.
  void Remove(std::string_view group, std::string_view key, uint64_t put_id);
  // Current members, sorted by key.
  Members MembersOf(std::string_view group) const;
  size_t group_count() const;

 private:
  using MemberMap = std::unordered_map<std::string_view, uint64_t, KeyHash, KeyEqual>;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, MemberMap, KeyHash, KeyEqual> groups;
  };
  Shard& ShardFor(std::string_view group) const;

  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace kvpool::master
