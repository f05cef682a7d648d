#include "master/offset_allocator.h"

#include <bit>
#include <cstdio>
#include <cstdlib>

namespace kvpool::master {

namespace {

// Invariant checks stay on in release builds: a corrupted allocator would hand the same
// bytes to two objects, which is the one thing the pool must never do.
[[noreturn]] void AllocatorInvariantFailed(const char* what) {
  std::fprintf(stderr, "OffsetAllocator invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

OffsetAllocator::OffsetAllocator(uint64_t capacity, uint64_t alignment)
    : alignment_(alignment),
      alignment_shift_(std::countr_zero(alignment)),
      total_units_(capacity >> std::countr_zero(alignment)),
      free_units_(0) {
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    AllocatorInvariantFailed("alignment must be a power of two");
  }
  for (auto& row : bin_heads_) {
    for (auto& head : row) head = kNone;
  }
  nodes_.reserve(64);
  if (total_units_ > 0) {
    uint32_t whole = NewNode();
    nodes_[whole].offset = 0;
    nodes_[whole].size = total_units_;
    InsertFree(whole);
    free_units_ = total_units_;
  }
}

OffsetAllocator::Bin OffsetAllocator::BinFor(uint64_t units) {
  if (units < kSecondLevelCount) return {0, static_cast<int>(units)};
  int msb = 63 - std::countl_zero(units);
  int first = msb - kSecondLevelBits + 1;
  int second = static_cast<int>((units >> (msb - kSecondLevelBits)) & (kSecondLevelCount - 1));
  return {first, second};
}

OffsetAllocator::Bin OffsetAllocator::BinAtLeast(uint64_t units) {
  if (units >= kSecondLevelCount) {
    int msb = 63 - std::countl_zero(units);
    uint64_t round = (uint64_t{1} << (msb - kSecondLevelBits)) - 1;
    if (units <= UINT64_MAX - round) units += round;
  }
  return BinFor(units);
}

uint32_t OffsetAllocator::NewNode() {
  if (node_free_list_ != kNone) {
    uint32_t index = node_free_list_;
    node_free_list_ = nodes_[index].next_free;
    nodes_[index] = Node{};
    return index;
  }
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void OffsetAllocator::ReleaseNode(uint32_t index) {
  nodes_[index] = Node{};
  nodes_[index].in_pool = true;
  nodes_[index].next_free = node_free_list_;
  node_free_list_ = index;
}

void OffsetAllocator::InsertFree(uint32_t index) {
  Node& node = nodes_[index];
  Bin bin = BinFor(node.size);
  uint32_t& head = bin_heads_[bin.first][bin.second];
  node.used = false;
  node.prev_free = kNone;
  node.next_free = head;
  if (head != kNone) nodes_[head].prev_free = index;
  head = index;
  second_level_bitmap_[bin.first] |= static_cast<uint16_t>(1u << bin.second);
  first_level_bitmap_ |= uint64_t{1} << bin.first;
}

void OffsetAllocator::RemoveFree(uint32_t index) {
  Node& node = nodes_[index];
  if (node.prev_free != kNone) {
    nodes_[node.prev_free].next_free = node.next_free;
  } else {
    Bin bin = BinFor(node.size);
    bin_heads_[bin.first][bin.second] = node.next_free;
    if (node.next_free == kNone) {
      second_level_bitmap_[bin.first] &= static_cast<uint16_t>(~(1u << bin.second));
      if (second_level_bitmap_[bin.first] == 0) {
        first_level_bitmap_ &= ~(uint64_t{1} << bin.first);
      }
    }
  }
  if (node.next_free != kNone) nodes_[node.next_free].prev_free = node.prev_free;
  node.prev_free = node.next_free = kNone;
}

uint32_t OffsetAllocator::FindFree(uint64_t units) const {
  // Fast path: any block in a bin at or above the rounded-up bin fits.
  Bin bin = BinAtLeast(units);
  if (bin.first < kFirstLevelCount) {
    uint32_t second_map = second_level_bitmap_[bin.first] & (~0u << bin.second);
    int first = bin.first;
    if (second_map == 0) {
      uint64_t first_map =
          bin.first + 1 < 64 ? first_level_bitmap_ & (~uint64_t{0} << (bin.first + 1)) : 0;
      if (first_map != 0) {
        first = std::countr_zero(first_map);
        second_map = second_level_bitmap_[first];
      }
    }
    if (second_map != 0) return bin_heads_[first][std::countr_zero(second_map)];
  }
  // Slow path: the request's own bin may hold a block that is big enough even though the
  // bin as a whole is not guaranteed to (e.g. one free block exactly the request's size).
  Bin own = BinFor(units);
  for (uint32_t i = bin_heads_[own.first][own.second]; i != kNone; i = nodes_[i].next_free) {
    if (nodes_[i].size >= units) return i;
  }
  return kNone;
}

std::optional<OffsetAllocator::Allocation> OffsetAllocator::Allocate(uint64_t size) {
  if (size == 0 || size > capacity()) return std::nullopt;
  uint64_t units = (size + alignment_ - 1) >> alignment_shift_;
  if (units > free_units_) return std::nullopt;
  uint32_t index = FindFree(units);
  if (index == kNone) return std::nullopt;
  RemoveFree(index);

  if (nodes_[index].size > units) {
    // Split: the tail stays free. NewNode may reallocate nodes_, so no references above.
    uint32_t rest = NewNode();
    Node& block = nodes_[index];
    Node& tail = nodes_[rest];
    tail.offset = block.offset + units;
    tail.size = block.size - units;
    tail.prev_phys = index;
    tail.next_phys = block.next_phys;
    if (block.next_phys != kNone) nodes_[block.next_phys].prev_phys = rest;
    block.next_phys = rest;
    block.size = units;
    InsertFree(rest);
  }
  Node& block = nodes_[index];
  block.used = true;
  free_units_ -= units;
  ++live_allocations_;
  return Allocation{block.offset << alignment_shift_, units << alignment_shift_, index};
}

void OffsetAllocator::Free(Handle handle) {
  if (handle >= nodes_.size() || nodes_[handle].in_pool || !nodes_[handle].used) {
    AllocatorInvariantFailed("Free of a handle that is not a live allocation");
  }
  uint32_t index = handle;
  free_units_ += nodes_[index].size;
  --live_allocations_;

  uint32_t prev = nodes_[index].prev_phys;
  if (prev != kNone && !nodes_[prev].used) {
    // Absorb this block into its free predecessor.
    RemoveFree(prev);
    nodes_[prev].size += nodes_[index].size;
    nodes_[prev].next_phys = nodes_[index].next_phys;
    if (nodes_[index].next_phys != kNone) nodes_[nodes_[index].next_phys].prev_phys = prev;
    ReleaseNode(index);
    index = prev;
  }
  uint32_t next = nodes_[index].next_phys;
  if (next != kNone && !nodes_[next].used) {
    RemoveFree(next);
    nodes_[index].size += nodes_[next].size;
    nodes_[index].next_phys = nodes_[next].next_phys;
    if (nodes_[next].next_phys != kNone) nodes_[nodes_[next].next_phys].prev_phys = index;
    ReleaseNode(next);
  }
  InsertFree(index);
}

std::optional<std::vector<OffsetAllocator::Handle>> OffsetAllocator::Restore(
    std::span<const Range> ranges) {
  if (live_allocations_ != 0 || free_units_ != total_units_) return std::nullopt;
  uint64_t end = 0;  // in units: where the previous range ended
  for (const Range& r : ranges) {
    const uint64_t units = (r.size + alignment_ - 1) >> alignment_shift_;
    if (r.size == 0 || (r.offset & (alignment_ - 1)) != 0 || (r.offset >> alignment_shift_) < end ||
        units > total_units_ || (r.offset >> alignment_shift_) > total_units_ - units) {
      return std::nullopt;
    }
    end = (r.offset >> alignment_shift_) + units;
  }

  nodes_.clear();
  node_free_list_ = kNone;
  for (auto& row : bin_heads_) {
    for (auto& head : row) head = kNone;
  }
  for (auto& bits : second_level_bitmap_) bits = 0;
  first_level_bitmap_ = 0;
  nodes_.reserve(2 * ranges.size() + 1);

  std::vector<Handle> handles;
  handles.reserve(ranges.size());
  std::vector<uint32_t> free_blocks;
  uint32_t previous = kNone;
  auto append = [&](uint64_t offset, uint64_t units, bool used) {
    const uint32_t index = NewNode();
    nodes_[index].offset = offset;
    nodes_[index].size = units;
    nodes_[index].used = used;
    nodes_[index].prev_phys = previous;
    if (previous != kNone) nodes_[previous].next_phys = index;
    previous = index;
    return index;
  };
  uint64_t position = 0;
  uint64_t used_units = 0;
  for (const Range& r : ranges) {
    const uint64_t offset = r.offset >> alignment_shift_;
    const uint64_t units = (r.size + alignment_ - 1) >> alignment_shift_;
    if (offset > position) free_blocks.push_back(append(position, offset - position, false));
    handles.push_back(append(offset, units, true));
    position = offset + units;
    used_units += units;
  }
  if (position < total_units_) free_blocks.push_back(append(position, total_units_ - position, false));
  for (uint32_t index : free_blocks) InsertFree(index);
  free_units_ = total_units_ - used_units;
  live_allocations_ = ranges.size();
  return handles;
}

uint64_t OffsetAllocator::largest_free_block() const {
  if (first_level_bitmap_ == 0) return 0;
  int first = 63 - std::countl_zero(first_level_bitmap_);
  int second = 15 - std::countl_zero(static_cast<uint16_t>(second_level_bitmap_[first]));
  uint64_t best = 0;
  for (uint32_t i = bin_heads_[first][second]; i != kNone; i = nodes_[i].next_free) {
    if (nodes_[i].size > best) best = nodes_[i].size;
  }
  return best << alignment_shift_;
}

}  // namespace kvpool::master
