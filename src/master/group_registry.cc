#include "master/group_registry.h"

#include <algorithm>

namespace kvpool::master {

GroupRegistry::GroupRegistry(size_t shard_count) {
  if (shard_count == 0) shard_count = 1;
  for (size_t i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<Shard>());
}

GroupRegistry::Shard& GroupRegistry::ShardFor(std::string_view group) const {
  return *shards_[KeyHash{}(group) % shards_.size()];
}

const std::string* GroupRegistry::Add(std::string_view group, const std::string& key,
                                      uint64_t put_id) {
  Shard& shard = ShardFor(group);
  std::lock_guard lock(shard.mu);
  auto it = shard.groups.find(group);
  if (it == shard.groups.end()) it = shard.groups.try_emplace(std::string(group)).first;
  // Re-keyed with this key's view: a member of the same name added before may be an older
  // incarnation whose key string is about to go.
  it->second.erase(key);
  it->second.emplace(key, put_id);
  return &it->first;
}

void GroupRegistry::Remove(std::string_view group, std::string_view key, uint64_t put_id) {
  Shard& shard = ShardFor(group);
  std::lock_guard lock(shard.mu);
  auto group_it = shard.groups.find(group);
  if (group_it == shard.groups.end()) return;
  auto member = group_it->second.find(key);
  if (member == group_it->second.end() || member->second != put_id) return;
  group_it->second.erase(member);
  if (group_it->second.empty()) shard.groups.erase(group_it);
}

GroupRegistry::Members GroupRegistry::MembersOf(std::string_view group) const {
  Members members;
  {
    Shard& shard = ShardFor(group);
    std::lock_guard lock(shard.mu);
    auto it = shard.groups.find(group);
    if (it == shard.groups.end()) return members;
    members.reserve(it->second.size());
    for (const auto& [key, put_id] : it->second) members.emplace_back(std::string(key), put_id);
  }
  std::sort(members.begin(), members.end());
  return members;
}

size_t GroupRegistry::group_count() const {
  size_t total = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    total += shard->groups.size();
  }
  return total;
}

}  // namespace kvpool::master
