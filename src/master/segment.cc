#include "master/segment.h"

namespace kvpool::master {

Segment::Segment(SegmentInfo info, uint64_t alignment)
    : info_(std::move(info)),
      allocator_(info_.size, alignment),
      capacity_(allocator_.capacity()),
      journal_(info_.keeps_index ? std::make_unique<SegmentJournal>() : nullptr) {}

void Segment::MarkDead() {
  alive_.store(false, std::memory_order_release);
  if (journal_) journal_->Close();
}

std::optional<std::vector<OffsetAllocator::Handle>> Segment::Restore(
    std::span<const OffsetAllocator::Range> ranges) {
  std::lock_guard lock(mu_);
  auto handles = allocator_.Restore(ranges);
  used_bytes_.store(allocator_.used_bytes(), std::memory_order_relaxed);
  allocations_.store(allocator_.allocation_count(), std::memory_order_relaxed);
  return handles;
}

std::optional<OffsetAllocator::Allocation> Segment::Allocate(uint64_t size) {
  std::lock_guard lock(mu_);
  auto allocation = allocator_.Allocate(size);
  if (allocation) {
    used_bytes_.store(allocator_.used_bytes(), std::memory_order_relaxed);
    allocations_.store(allocator_.allocation_count(), std::memory_order_relaxed);
  }
  return allocation;
}

void Segment::Free(OffsetAllocator::Handle handle) {
  std::lock_guard lock(mu_);
  allocator_.Free(handle);
  used_bytes_.store(allocator_.used_bytes(), std::memory_order_relaxed);
  allocations_.store(allocator_.allocation_count(), std::memory_order_relaxed);
}

uint64_t Segment::largest_free_block() const {
  std::lock_guard lock(mu_);
  return allocator_.largest_free_block();
}

}  // namespace kvpool::master
