#include "master/eviction_memory.h"

#include "master/key_hash.h"

namespace kvpool::master {

EvictionMemory::EvictionMemory(size_t slots) : slots_((slots + kWays - 1) / kWays * kWays) {}

uint64_t EvictionMemory::HashOf(std::string_view key) {
  const uint64_t h = KeyHash{}(key);
  return h == 0 ? 1 : h;  // 0 marks an empty slot
}

void EvictionMemory::Remember(std::string_view key, int64_t evicted_ms) {
  if (slots_.empty()) return;
  const uint64_t hash = HashOf(key);
  std::lock_guard lock(mu_);
  Slot* bucket = &slots_[hash % (slots_.size() / kWays) * kWays];
  Slot* target = bucket;
  for (size_t w = 0; w < kWays; ++w) {
    if (bucket[w].hash == hash || bucket[w].hash == 0) {
      target = &bucket[w];
      break;
    }
    if (bucket[w].evicted_ms < target->evicted_ms) target = &bucket[w];  // the oldest goes
  }
  *target = {hash, evicted_ms};
}

std::optional<int64_t> EvictionMemory::EvictedAt(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t hash = HashOf(key);
  std::lock_guard lock(mu_);
  const Slot* bucket = &slots_[hash % (slots_.size() / kWays) * kWays];
  for (size_t w = 0; w < kWays; ++w) {
    if (bucket[w].hash == hash) return bucket[w].evicted_ms;
  }
  return std::nullopt;
}

}  // namespace kvpool::master
