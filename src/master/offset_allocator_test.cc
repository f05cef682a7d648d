#include "master/offset_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace kvpool::master {
namespace {

TEST(OffsetAllocatorTest, AlignsOffsetsAndSizes) {
  OffsetAllocator alloc(1 << 20, 64);
  auto a = alloc.Allocate(1);
  auto b = alloc.Allocate(65);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->size, 64u);
  EXPECT_EQ(b->size, 128u);
  EXPECT_EQ(a->offset % 64, 0u);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_EQ(alloc.free_bytes(), (1u << 20) - 192);
}

TEST(OffsetAllocatorTest, RejectsZeroAndOversize) {
  OffsetAllocator alloc(4096);
  EXPECT_FALSE(alloc.Allocate(0));
  EXPECT_FALSE(alloc.Allocate(4097));
  EXPECT_EQ(alloc.free_bytes(), 4096u);
}

TEST(OffsetAllocatorTest, WholeCapacityFitsExactly) {
  // One free block exactly the request's size sits in a bin that is not "guaranteed to fit";
  // the allocator must still find it.
  for (uint64_t capacity : {64ull, 4096ull, 100 * 64ull, 1000 * 64ull, (1ull << 30) + 64 * 7}) {
    OffsetAllocator alloc(capacity);
    auto a = alloc.Allocate(capacity);
    ASSERT_TRUE(a) << capacity;
    EXPECT_EQ(a->offset, 0u);
    EXPECT_EQ(alloc.free_bytes(), 0u);
    EXPECT_FALSE(alloc.Allocate(1));
    alloc.Free(a->handle);
    EXPECT_EQ(alloc.largest_free_block(), capacity);
  }
}

TEST(OffsetAllocatorTest, CapacityRoundsDownToAlignment) {
  OffsetAllocator alloc(1000, 64);
  EXPECT_EQ(alloc.capacity(), 960u);
}

TEST(OffsetAllocatorTest, FreeCoalescesWithBothNeighbours) {
  OffsetAllocator alloc(64 * 3);
  auto a = alloc.Allocate(64), b = alloc.Allocate(64), c = alloc.Allocate(64);
  ASSERT_TRUE(a && b && c);
  alloc.Free(a->handle);
  alloc.Free(c->handle);
  EXPECT_EQ(alloc.largest_free_block(), 64u);
  alloc.Free(b->handle);
  EXPECT_EQ(alloc.largest_free_block(), 192u);
  EXPECT_TRUE(alloc.Allocate(192));
}

// Randomised allocate/free against a model of live ranges: no overlap, never past capacity,
// free bytes always match, and freeing everything coalesces back to one block.
TEST(OffsetAllocatorTest, RandomisedAgainstModel) {
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    std::mt19937_64 rng(seed);
    const uint64_t capacity = (64ull << 20) + 64 * 13;
    OffsetAllocator alloc(capacity, 64);
    std::map<uint64_t, OffsetAllocator::Allocation> live;  // offset -> allocation
    uint64_t used = 0;
    for (int step = 0; step < 50000; ++step) {
      bool do_alloc = live.empty() || (rng() % 100) < 55;
      if (do_alloc) {
        // Mix of tiny, medium and large requests.
        uint64_t size;
        switch (rng() % 3) {
          case 0: size = 1 + rng() % 512; break;
          case 1: size = 1 + rng() % (64 << 10); break;
          default: size = 1 + rng() % (4 << 20); break;
        }
        auto a = alloc.Allocate(size);
        if (!a) {
          // Failing is only allowed when no free block is large enough.
          ASSERT_LT(alloc.largest_free_block(), size) << "seed " << seed;
          continue;
        }
        ASSERT_GE(a->size, size);
        ASSERT_EQ(a->offset % 64, 0u);
        ASSERT_LE(a->offset + a->size, alloc.capacity());
        auto next = live.lower_bound(a->offset);
        if (next != live.end()) {
          ASSERT_LE(a->offset + a->size, next->first) << "overlap";
        }
        if (next != live.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second.size, a->offset) << "overlap";
        }
        live.emplace(a->offset, *a);
        used += a->size;
      } else {
        auto it = live.begin();
        std::advance(it, rng() % live.size());
        used -= it->second.size;
        alloc.Free(it->second.handle);
        live.erase(it);
      }
      ASSERT_EQ(alloc.used_bytes(), used);
      ASSERT_EQ(alloc.allocation_count(), live.size());
    }
    for (auto& [offset, a] : live) alloc.Free(a.handle);
    EXPECT_EQ(alloc.free_bytes(), alloc.capacity());
    EXPECT_EQ(alloc.largest_free_block(), alloc.capacity());
  }
}

TEST(OffsetAllocatorDeathTest, DoubleFreeAborts) {
  OffsetAllocator alloc(4096);
  auto a = alloc.Allocate(64);
  auto b = alloc.Allocate(64);  // keeps a's node from being merged away
  ASSERT_TRUE(a && b);
  alloc.Free(a->handle);
  EXPECT_DEATH(alloc.Free(a->handle), "not a live allocation");
}

TEST(OffsetAllocatorTest, RestoreRebuildsAroundRangesInUse) {
  OffsetAllocator alloc(64 * 100, 64);
  const std::vector<OffsetAllocator::Range> used = {{0, 64}, {64 * 10, 100}, {64 * 50, 64 * 40}};
  auto handles = alloc.Restore(used);
  ASSERT_TRUE(handles);
  ASSERT_EQ(handles->size(), 3u);
  EXPECT_EQ(alloc.allocation_count(), 3u);
  EXPECT_EQ(alloc.used_bytes(), 64u * (1 + 2 + 40));
  EXPECT_EQ(alloc.largest_free_block(), 64u * 38);  // between the 2nd and 3rd range

  // Everything else can be had, and none of it overlaps a restored range.
  std::vector<OffsetAllocator::Allocation> fresh;
  while (auto a = alloc.Allocate(64)) fresh.push_back(*a);
  EXPECT_EQ(fresh.size(), 100u - 43u);
  for (const auto& a : fresh) {
    for (const auto& r : used) {
      EXPECT_TRUE(a.offset + a.size <= r.offset || a.offset >= r.offset + r.size) << a.offset;
    }
  }
  // Restored handles free like any other, and everything coalesces back to one block.
  for (auto h : *handles) alloc.Free(h);
  for (const auto& a : fresh) alloc.Free(a.handle);
  EXPECT_EQ(alloc.free_bytes(), 6400u);
  EXPECT_EQ(alloc.largest_free_block(), 6400u);
}

TEST(OffsetAllocatorTest, RestoreRefusesBadRangesAndChangesNothing) {
  OffsetAllocator alloc(64 * 10, 64);
  using R = OffsetAllocator::Range;
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{64, 64}, {0, 64}}));      // unsorted
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{0, 100}, {64, 64}}));     // overlapping once aligned
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{32, 64}}));               // misaligned
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{64 * 9, 128}}));          // past the end
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{0, 0}}));                 // empty
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{~0ull - 63, 64}}));       // offset overflows
  EXPECT_EQ(alloc.free_bytes(), 640u);
  auto a = alloc.Allocate(64);
  ASSERT_TRUE(a);
  EXPECT_FALSE(alloc.Restore(std::vector<R>{{64 * 5, 64}}));           // not fresh
  EXPECT_EQ(alloc.allocation_count(), 1u);
}

}  // namespace
}  // namespace kvpool::master
