#include "trace/block_ids.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvpool::trace {
namespace {

std::vector<uint64_t> Ids(const BlockIds& ids) { return {ids.begin(), ids.end()}; }

TEST(BlockIdsBuilder, ExtendingPromptsShareOneBuffer) {
  BlockIdsBuilder builder;
  const BlockIds first = builder.Share(std::vector<uint64_t>{1, 2, 3});
  const BlockIds second = builder.Share(std::vector<uint64_t>{1, 2, 3, 4, 5});
  EXPECT_EQ(first.storage(), second.storage());
  EXPECT_EQ(Ids(first), (std::vector<uint64_t>{1, 2, 3}));  // unaffected by the append
  EXPECT_EQ(Ids(second), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  const BlockIds shorter = builder.Share(std::vector<uint64_t>{1, 2});
  EXPECT_EQ(shorter.storage(), second.storage());
  EXPECT_EQ(Ids(shorter), (std::vector<uint64_t>{1, 2}));
}

TEST(BlockIdsBuilder, ADivergingPromptGetsItsOwnBuffer) {
  BlockIdsBuilder builder;
  const BlockIds first = builder.Share(std::vector<uint64_t>{1, 2, 3});
  const BlockIds diverged = builder.Share(std::vector<uint64_t>{1, 9, 3, 4});
  EXPECT_NE(first.storage().get(), diverged.storage().get());
  EXPECT_EQ(Ids(first), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Ids(diverged), (std::vector<uint64_t>{1, 9, 3, 4}));
}

TEST(BlockIds, EqualityIsByContentNotStorage) {
  BlockIdsBuilder builder;
  builder.Append(std::vector<uint64_t>{7, 8, 9});
  EXPECT_EQ(builder.Prefix(2), BlockIds({7, 8}));
  EXPECT_FALSE(builder.Snapshot() == BlockIds({7, 8}));
  EXPECT_EQ(BlockIds(), BlockIds(std::vector<uint64_t>{}));
}

}  // namespace
}  // namespace kvpool::trace
