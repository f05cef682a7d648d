// ChunkLru: which chunks (by key) a cache of a given number of chunks holds under least-
// recently-used eviction — the capacity planner's model of a GPU prefix cache and of the
// pool (cache_model.h). Keys only, no bytes.
//
// Eviction is by watermarks, as the pool's own (master::PoolOptions): once more than `high`
// chunks are held, the least recent go until `low` are. A GPU cache evicts one chunk per
// chunk it needs: high == low == capacity.
//
// Chunks of one prompt used at once are ranked in the order the modelled cache ranks them:
// the GPU prefix cache releases a request's blocks last first, so its first chunk is the most
// recent (`kHeadMostRecent`: a prefix loses its tail first); the pool files a batch in key
// order, so its first chunk is the least recent (`kHeadLeastRecent`).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

#include "connector/chunk_keys.h"

namespace kvpool::replay {

class ChunkLru {
 public:
  enum class Order { kHeadMostRecent, kHeadLeastRecent };
  // REQUIRES: low <= high.
  ChunkLru(uint64_t high, uint64_t low, Order order) : high_(high), low_(low), order_of_batch_(order) {}

  // How many of keys[from..] are held, counting from `from` up to the first one that is not.
  size_t LeadingRun(std::span<const connector::ChunkKey> keys, size_t from) const {
    size_t n = 0;
    while (from + n < keys.size() && index_.contains(keys[from + n])) ++n;
    return n;
  }
  // keys[from, from + n) were read: the most recent now. REQUIRES: all held.
  void Touch(std::span<const connector::ChunkKey> keys, size_t from, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = order_of_batch_ == Order::kHeadLeastRecent ? from + k : from + n - 1 - k;
      order_.splice(order_.end(), order_, index_.at(keys[i]));
    }
  }
  // Adds the keys[from..] not held yet (a save: one already held is skipped, as the pool skips
  // it, without becoming more recent), then evicts down to the watermark.
  void Insert(std::span<const connector::ChunkKey> keys, size_t from) {
    for (size_t k = from; k < keys.size(); ++k) {
      const size_t i = order_of_batch_ == Order::kHeadLeastRecent ? k : keys.size() - 1 - (k - from);
      if (index_.contains(keys[i])) continue;
      index_.emplace(keys[i], order_.insert(order_.end(), keys[i]));
    }
    if (index_.size() <= high_) return;
    while (index_.size() > low_) {
      index_.erase(order_.front());
      order_.pop_front();
      ++evicted_;
    }
  }

  // keys[from..] that are held become the least recent of all (supersession: first to evict).
  void Release(std::span<const connector::ChunkKey> keys, size_t from) {
    for (size_t k = from; k < keys.size(); ++k) {
      if (auto it = index_.find(keys[k]); it != index_.end()) order_.splice(order_.begin(), order_, it->second);
    }
  }

  size_t size() const { return index_.size(); }
  uint64_t evicted() const { return evicted_; }

 private:
  struct KeyHash {
    size_t operator()(const connector::ChunkKey& k) const { return static_cast<size_t>(k.low ^ (k.high * 31)); }
  };
  const uint64_t high_, low_;
  const Order order_of_batch_;
  std::list<connector::ChunkKey> order_;  // least recent first
  std::unordered_map<connector::ChunkKey, std::list<connector::ChunkKey>::iterator, KeyHash> index_;
  uint64_t evicted_ = 0;
};

}  // namespace kvpool::replay
