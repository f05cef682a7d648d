#include "master/object_index.h"

namespace kvpool::master {

ObjectIndex::ObjectIndex(size_t shard_count) {
  if (shard_count == 0) shard_count = 1;
  shards_.reserve(shard_count);
  for (size_t i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<ObjectShard>());
}

}  // namespace kvpool::master
