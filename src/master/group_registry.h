// GroupRegistry: group name -> the keys put under it.
//
// Eviction treats a group as one unit: it must find every member, including members in
// object shards it has not looked at. Membership is tagged with the member's put_id so a
// late removal of an old incarnation of a key cannot drop a newer one.
//
// Thread-safe (sharded by group name). Lock order: a caller may hold object-shard locks
// when calling in; the registry never calls out while holding its own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvpool::master {

class GroupRegistry {
 public:
  using Members = std::vector<std::pair<std::string, uint64_t>>;  // (key, put_id), sorted

  explicit GroupRegistry(size_t shard_count = 16);

  void Add(const std::string& group, const std::string& key, uint64_t put_id);
  // No-op unless `key` is a member with this put_id. Forgets the group once empty.
  void Remove(const std::string& group, const std::string& key, uint64_t put_id);
  // Current members, sorted by key.
  Members MembersOf(const std::string& group) const;
  size_t group_count() const;

 private:
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::unordered_map<std::string, uint64_t>> groups;
  };
  Shard& ShardFor(const std::string& group) const;

  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace kvpool::master
