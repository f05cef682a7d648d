#include "master/eviction_memory.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool::master {
namespace {

TEST(EvictionMemory, RemembersWhenAKeyWasEvictedAndNothingElse) {
  EvictionMemory memory(1024);
  memory.Remember("ns/a", 100);
  memory.Remember("ns/b", 200);
  EXPECT_EQ(memory.EvictedAt("ns/a"), 100);
  EXPECT_EQ(memory.EvictedAt("ns/b"), 200);
  EXPECT_EQ(memory.EvictedAt("ns/c"), std::nullopt);  // never evicted
  memory.Remember("ns/a", 300);                        // put again, evicted again
  EXPECT_EQ(memory.EvictedAt("ns/a"), 300);
}

TEST(EvictionMemory, ForgetsTheOldestWhenFullButNeverGrows) {
  // One bucket: the fifth key pushes out the oldest of the four.
  EvictionMemory memory(EvictionMemory::kWays);
  for (int i = 0; i < 4; ++i) memory.Remember("k" + std::to_string(i), 10 + i);
  memory.Remember("k4", 20);
  EXPECT_EQ(memory.EvictedAt("k0"), std::nullopt);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(memory.EvictedAt("k" + std::to_string(i)), 10 + i);
  EXPECT_EQ(memory.EvictedAt("k4"), 20);

  // A table of 4,096 slots keeps most of 2,048 keys (a bucket that draws more than four forgets some).
  EvictionMemory big(4096);
  for (int i = 0; i < 2048; ++i) big.Remember("key/" + std::to_string(i), i);
  int kept = 0;
  for (int i = 0; i < 2048; ++i) kept += big.EvictedAt("key/" + std::to_string(i)).has_value() ? 1 : 0;
  EXPECT_GT(kept, 1900);
}

TEST(EvictionMemory, OfNoSizeRemembersNothing) {
  EvictionMemory memory(0);
  memory.Remember("x", 1);
  EXPECT_EQ(memory.EvictedAt("x"), std::nullopt);
}

}  // namespace
}  // namespace kvpool::master
