// OffsetAllocator hands out non-overlapping ranges of [0, capacity) in O(1).
//
// It manages offsets only, never memory: the master uses one per storage segment to decide
// where an object's bytes go, and the storage service owns the bytes themselves.
//
// Design (TLSF-style two-level segregated fit):
//   * sizes are counted in units of `alignment` bytes; every offset and size handed out is
//     a multiple of the alignment;
//   * free blocks sit in bins indexed by (first level = log2 of the size, second level =
//     the next 4 bits), with one bitmap per level, so finding a non-empty bin that is
//     guaranteed to fit is a couple of bit scans;
//   * blocks form a doubly linked list in address order, so Free merges a block with its
//     free neighbours at once: freeing everything always coalesces back to one block.
// Block bookkeeping lives in a node pool that grows geometrically and recycles nodes, so
// steady-state Allocate/Free do no heap allocation.
//
// Not thread-safe: callers serialise access (the master keeps one mutex per segment).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kvpool::master {

class OffsetAllocator {
 public:
  // Opaque token naming one allocation; pass it back to Free.
  using Handle = uint32_t;

  struct Allocation {
    uint64_t offset = 0;  // multiple of alignment()
    uint64_t size = 0;    // requested size rounded up to alignment()
    Handle handle = 0;
  };

  // Manages [0, capacity rounded down to alignment).
  // REQUIRES: alignment is a power of two.
  explicit OffsetAllocator(uint64_t capacity, uint64_t alignment = 64);

  OffsetAllocator(const OffsetAllocator&) = delete;
  OffsetAllocator& operator=(const OffsetAllocator&) = delete;

  // A range of at least `size` bytes, or nullopt when no free block is large enough
  // (or size is 0). Never returns a range past capacity() or overlapping a live one.
  std::optional<Allocation> Allocate(uint64_t size);

  struct Range {
    uint64_t offset = 0;
    uint64_t size = 0;  // bytes; rounded up to alignment()
  };
  // Rebuilds a fresh allocator (nothing allocated yet) around ranges already in use: a master
  // taking a segment back from the store that kept its index. `ranges` must be sorted by
  // offset, aligned, non-overlapping, non-empty and inside capacity(). Returns one handle per
  // range in order, or nullopt — changing nothing — when they are not or the allocator is
  // not fresh. O(ranges).
  std::optional<std::vector<Handle>> Restore(std::span<const Range> ranges);

  // Returns the range to the free pool and merges it with free neighbours.
  // REQUIRES: `handle` came from Allocate on this allocator and was not freed since.
  void Free(Handle handle);

  uint64_t capacity() const { return total_units_ * alignment_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t free_bytes() const { return free_units_ * alignment_; }
  uint64_t used_bytes() const { return capacity() - free_bytes(); }
  // Size of the largest single free block: an Allocate of up to this many bytes succeeds.
  uint64_t largest_free_block() const;
  // Number of live allocations.
  uint64_t allocation_count() const { return live_allocations_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr int kSecondLevelBits = 4;
  static constexpr int kSecondLevelCount = 1 << kSecondLevelBits;
  static constexpr int kFirstLevelCount = 64 - kSecondLevelBits + 1;

  struct Node {
    uint64_t offset = 0;  // in units
    uint64_t size = 0;    // in units
    uint32_t prev_phys = kNone, next_phys = kNone;  // address-order neighbours
    uint32_t prev_free = kNone, next_free = kNone;  // bin list links (free blocks only)
    bool used = false;
    bool in_pool = false;  // recycled node, not a block
  };
  struct Bin {
    int first = 0;
    int second = 0;
  };

  // The bin a block of `units` belongs to (rounds down).
  static Bin BinFor(uint64_t units);
  // The smallest bin whose every block holds at least `units` (rounds up).
  static Bin BinAtLeast(uint64_t units);

  uint32_t NewNode();
  void ReleaseNode(uint32_t index);
  void InsertFree(uint32_t index);
  void RemoveFree(uint32_t index);
  // A free block of at least `units`, or kNone.
  uint32_t FindFree(uint64_t units) const;

  uint64_t alignment_;
  int alignment_shift_;
  uint64_t total_units_;
  uint64_t free_units_;
  uint64_t live_allocations_ = 0;

  uint64_t first_level_bitmap_ = 0;
  uint16_t second_level_bitmap_[kFirstLevelCount] = {};
  uint32_t bin_heads_[kFirstLevelCount][kSecondLevelCount];

  std::vector<Node> nodes_;
  uint32_t node_free_list_ = kNone;  // recycled nodes, linked through next_free
};

}  // namespace kvpool::master
