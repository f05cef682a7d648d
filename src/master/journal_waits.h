// JournalWaits: what one PoolMetadata call waits for before it answers — the last record it
// appended to each segment's journal — and which stores did not confirm in time.
// Not thread-safe: one per call, on the caller's stack.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "master/segment.h"

namespace kvpool::master {

class JournalWaits {
 public:
  // Records that `seq` (0: nothing appended) must be confirmed by `segment`'s store.
  void Note(const std::shared_ptr<Segment>& segment, uint64_t seq) {
    if (seq == 0) return;
    for (auto& [s, last] : waits_) {
      if (s.get() == segment.get()) {
        last = std::max(last, seq);
        return;
      }
    }
    waits_.emplace_back(segment, seq);
  }

  bool empty() const { return waits_.empty(); }

  // Waits for every noted store (the stores confirm concurrently, so the whole wait is the
  // slowest of them, bounded by `timeout`). Returns the ids of segments that did not confirm.
  std::unordered_set<uint64_t> Wait(std::chrono::milliseconds timeout) const {
    std::unordered_set<uint64_t> failed;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const auto& [segment, seq] : waits_) {
      if (!segment->journal()->WaitConfirmed(seq, deadline)) failed.insert(segment->id());
    }
    return failed;
  }

 private:
  std::vector<std::pair<std::shared_ptr<Segment>, uint64_t>> waits_;
};

}  // namespace kvpool::master
