#include "master/object_index.h"

#include <xxhash.h>

namespace kvpool::master {

size_t KeyHash::operator()(std::string_view key) const {
  return static_cast<size_t>(XXH3_64bits(key.data(), key.size()));
}

ObjectIndex::ObjectIndex(size_t shard_count) {
  if (shard_count == 0) shard_count = 1;
  shards_.reserve(shard_count);
  for (size_t i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<ObjectShard>());
}


}  // namespace kvpool::master
