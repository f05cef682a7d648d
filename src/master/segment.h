// Segment: one storage service's contribution of memory, as the master sees it — an
// endpoint record plus an OffsetAllocator deciding where objects go inside it.
//
// Thread-safe: the allocator sits behind the segment's own mutex, so allocations on
// different segments never contend. Counters are also mirrored in atomics so placement can
// compare segments without taking their locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "master/offset_allocator.h"
#include "master/segment_journal.h"

namespace kvpool::master {

// How clients reach a segment's bytes (mirrors proto::SegmentEndpoint).
struct SegmentInfo {
  uint64_t id = 0;  // assigned by the master, never reused
  std::string store_id;
  std::string host_id;
  std::string tcp_address;
  std::string shm_socket;
  uint64_t size = 0;
  bool keeps_index = false;  // the store keeps this segment's index (it has a journal)
  // The store's SSD tier (0: none): objects leaving this segment may be demoted there.
  uint64_t ssd_capacity_bytes = 0;
  uint64_t ssd_max_value_bytes = 0;
};

class Segment {
 public:
  Segment(SegmentInfo info, uint64_t alignment);

  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const SegmentInfo& info() const { return info_; }
  uint64_t id() const { return info_.id; }

  std::optional<OffsetAllocator::Allocation> Allocate(uint64_t size);
  // OffsetAllocator::Restore on this (fresh) segment.
  std::optional<std::vector<OffsetAllocator::Handle>> Restore(
      std::span<const OffsetAllocator::Range> ranges);
  // REQUIRES: `handle` is a live allocation of this segment.
  void Free(OffsetAllocator::Handle handle);

  // Lock-free reads; may lag a concurrent Allocate/Free by a moment.
  uint64_t capacity() const { return capacity_; }
  uint64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  uint64_t free_bytes() const { return capacity_ - used_bytes(); }
  uint64_t allocation_count() const { return allocations_.load(std::memory_order_relaxed); }
  uint64_t largest_free_block() const;

  // A dead segment was unmounted: nothing new may be placed on it or attached to an object.
  // Frees into it stay harmless (the allocator lives as long as any replica refers to it).
  bool alive() const { return alive_.load(std::memory_order_acquire); }
  // Also closes the journal: nobody waits on a store that is gone.
  void MarkDead();

  // Changes to the store's copy of the index; null when the store keeps none.
  SegmentJournal* journal() const { return journal_.get(); }

  // Demotion takes objects of at most this size into the store's SSD tier (0: it has none;
  // a tier needs the journal, which carries the demotions).
  uint64_t ssd_max_value_bytes() const { return journal_ ? info_.ssd_max_value_bytes : 0; }
  // Values in the store's SSD tier as the master counts them (pool_tiering.cc).
  void AddSsdObject(int64_t bytes, int64_t objects) {
    ssd_used_bytes_.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed);
    ssd_objects_.fetch_add(static_cast<uint64_t>(objects), std::memory_order_relaxed);
  }
  uint64_t ssd_used_bytes() const { return ssd_used_bytes_.load(std::memory_order_relaxed); }
  uint64_t ssd_objects() const { return ssd_objects_.load(std::memory_order_relaxed); }

 private:
  const SegmentInfo info_;
  mutable std::mutex mu_;
  OffsetAllocator allocator_;  // guarded by mu_
  const uint64_t capacity_;
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<uint64_t> allocations_{0};
  std::atomic<bool> alive_{true};
  std::atomic<uint64_t> ssd_used_bytes_{0};
  std::atomic<uint64_t> ssd_objects_{0};
  const std::unique_ptr<SegmentJournal> journal_;
};

}  // namespace kvpool::master
