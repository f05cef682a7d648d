// EvictionMemory: which keys this master evicted for good, and when — so that a lookup that
// misses can say why (issue 44: "evicted N s ago" against "never stored here"), the silent
// failure operators of peers' pools report most (0% hits with nothing to tell them apart).
//
// Bounded and lossy by design: a set-associative table of key hashes (16 bytes a slot, a
// bucket of kWays slots per hash, the oldest in a full bucket replaced). A key it no longer
// holds reads as "no record": never stored here, or evicted longer ago than it remembers. A
// 64-bit hash collision could call a never-stored key evicted; it cannot make a key readable.
// Removals (a client's BatchRemove) are not evictions and are not remembered.
//
// Thread-safe (one mutex, a leaf in PoolMetadata's lock order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace kvpool::master {

class EvictionMemory {
 public:
  static constexpr size_t kWays = 4;

  // Room for about `slots` keys (rounded up to whole buckets); 0 remembers nothing.
  explicit EvictionMemory(size_t slots);

  void Remember(std::string_view key, int64_t evicted_ms);
  // When `key` was evicted, if it is remembered.
  std::optional<int64_t> EvictedAt(std::string_view key) const;

 private:
  struct Slot {
    uint64_t hash = 0;  // 0: empty
    int64_t evicted_ms = 0;
  };
  static uint64_t HashOf(std::string_view key);

  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // buckets of kWays consecutive slots
};

}  // namespace kvpool::master
