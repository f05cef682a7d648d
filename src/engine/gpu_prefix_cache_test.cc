#include "engine/gpu_prefix_cache.h"

#include <gtest/gtest.h>

namespace kvpool::engine {
namespace {

std::vector<uint64_t> Keys(std::initializer_list<uint64_t> k) { return k; }

TEST(GpuPrefixCacheTest, PublishedBlocksAreFoundByTheirLeadingKeys) {
  GpuPrefixCache cache(8);
  auto blocks = cache.AllocateBlocks(3).value();
  cache.Publish(Keys({10, 11, 12}), blocks, 3);
  cache.Release(blocks);
  EXPECT_EQ(cache.cached_blocks(), 3u);
  // A prompt sharing the first two blocks then diverging.
  auto hit = cache.AcquirePrefix(Keys({10, 11, 99, 12}), 10);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], blocks[0]);
  EXPECT_EQ(hit[1], blocks[1]);
  EXPECT_EQ(cache.AcquirePrefix(Keys({10, 11, 12}), 1).size(), 1u);  // max_blocks caps it
}

TEST(GpuPrefixCacheTest, ReferencedBlocksAreNeverEvicted) {
  GpuPrefixCache cache(4);
  auto a = cache.AllocateBlocks(2).value();
  cache.Publish(Keys({1, 2}), a, 2);
  auto b = cache.AllocateBlocks(2).value();
  EXPECT_FALSE(cache.AllocateBlocks(1).ok());  // all four referenced
  cache.Release(b);
  EXPECT_EQ(cache.free_blocks(), 2u);  // anonymous blocks go back to the free list
  EXPECT_TRUE(cache.AllocateBlocks(2).ok());
  EXPECT_EQ(cache.CountPrefix(Keys({1, 2})), 2u);
}

TEST(GpuPrefixCacheTest, EvictsLeastRecentlyUsedAndTailsBeforePrefixes) {
  GpuPrefixCache cache(4);
  auto a = cache.AllocateBlocks(2).value();
  cache.Publish(Keys({1, 2}), a, 2);
  cache.Release(a);  // 2 released before 1: the tail goes first
  auto b = cache.AllocateBlocks(2).value();
  cache.Publish(Keys({7, 8}), b, 2);
  cache.Release(b);
  auto c = cache.AllocateBlocks(1).value();  // evicts the oldest tail: key 2
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.CountPrefix(Keys({1, 2})), 1u);
  EXPECT_EQ(cache.CountPrefix(Keys({7, 8})), 2u);
  // Touching 1 again makes it recent; the next eviction takes 8, then 7.
  cache.Release(cache.AcquirePrefix(Keys({1}), 1));
  auto d = cache.AllocateBlocks(2).value();
  EXPECT_EQ(cache.CountPrefix(Keys({1})), 1u);
  EXPECT_EQ(cache.CountPrefix(Keys({7})), 0u);
  (void)c;
  (void)d;
}

TEST(GpuPrefixCacheTest, DuplicateKeysKeepTheFirstBlock) {
  GpuPrefixCache cache(4);
  auto a = cache.AllocateBlocks(1).value();
  auto b = cache.AllocateBlocks(1).value();
  cache.Publish(Keys({5}), a, 1);
  cache.Publish(Keys({5}), b, 1);  // computed twice concurrently
  cache.Release(b);
  cache.Release(a);
  EXPECT_EQ(cache.cached_blocks(), 1u);
  EXPECT_EQ(cache.free_blocks(), 3u);
  EXPECT_EQ(cache.AcquirePrefix(Keys({5}), 1)[0], a[0]);
}

TEST(GpuPrefixCacheTest, PartialTailIsNotPublished) {
  GpuPrefixCache cache(4);
  auto a = cache.AllocateBlocks(3).value();
  cache.Publish(Keys({1, 2, 3}), a, 2);  // the third block is partial
  cache.Release(a);
  EXPECT_EQ(cache.CountPrefix(Keys({1, 2, 3})), 2u);
  EXPECT_EQ(cache.free_blocks(), 2u);
}

}  // namespace
}  // namespace kvpool::engine
