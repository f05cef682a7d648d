#include "handoff/handoff_layouts.h"

#include <gtest/gtest.h>

#include <random>

namespace kvpool::handoff {
namespace {

PrefillLayout Pp(std::vector<uint32_t> split, KvLayoutKind kind = KvLayoutKind::kLatent, uint32_t bytes = 576) {
  PrefillLayout p;
  p.kind = kind;
  p.stage_layers = std::move(split);
  p.bytes_per_token_per_layer = bytes;
  p.block_tokens = 64;
  return p;
}

DecodeLayout Dcp(uint32_t layers, uint32_t w, uint32_t i, KvLayoutKind kind = KvLayoutKind::kLatent,
                 uint32_t bytes = 576) {
  DecodeLayout d;
  d.kind = kind;
  d.num_layers = layers;
  d.bytes_per_token_per_layer = bytes;
  d.block_tokens = 16;
  d.dcp_ranks = w;
  d.interleave = i;
  return d;
}

TEST(DcpTokenMapTest, InterleaveOneIsEveryWthToken) {
  const DcpTokenMap m{4, 1};
  EXPECT_EQ(m.Owner(0), 0u);
  EXPECT_EQ(m.Owner(5), 1u);
  EXPECT_EQ(m.Local(5), 1u);
  EXPECT_EQ(m.Global(3, 2), 11u);
  EXPECT_EQ(m.CountBelow(1, 6), 2u);  // tokens 1 and 5
}

TEST(DcpTokenMapTest, InterleaveGroupsRunsOfI) {
  const DcpTokenMap m{2, 3};  // rank 0: 0 1 2 6 7 8 ..., rank 1: 3 4 5 9 10 11 ...
  EXPECT_EQ(m.Owner(4), 1u);
  EXPECT_EQ(m.Local(4), 1u);
  EXPECT_EQ(m.Local(9), 3u);
  EXPECT_EQ(m.Global(1, 3), 9u);
  EXPECT_EQ(m.CountBelow(0, 7), 4u);
  EXPECT_EQ(m.CountBelow(1, 7), 3u);
}

// Owner/Local/Global/CountBelow agree with a brute-force walk for random W and I.
TEST(DcpTokenMapTest, PropertiesAgainstBruteForce) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    const DcpTokenMap m{static_cast<uint32_t>(1 + rng() % 8), static_cast<uint32_t>(1 + rng() % 17)};
    std::vector<uint64_t> count(m.ranks, 0);
    for (uint64_t g = 0; g < 500; ++g) {
      for (uint32_t r = 0; r < m.ranks; ++r) ASSERT_EQ(m.CountBelow(r, g), count[r]) << "r=" << r << " g=" << g;
      const uint32_t r = m.Owner(g);
      ASSERT_EQ(m.Local(g), count[r]) << "local index is the count of the rank's earlier tokens";
      ASSERT_EQ(m.Global(r, count[r]), g);
      ++count[r];
    }
  }
}

TEST(HandoffLayoutsTest, PrefillRanksAndLayerRanges) {
  const PrefillLayout p = Pp({20, 20, 20, 18});
  ASSERT_TRUE(p.Validate().ok());
  EXPECT_EQ(p.num_ranks(), 4u);
  EXPECT_EQ(p.total_layers(), 78u);
  EXPECT_EQ(p.first_layer(3), 60u);
  const PagedKvLayout l = p.RankLayout(3);
  EXPECT_EQ(l.num_layers, 18u);
  EXPECT_EQ(l.block_tokens, 64u);
  EXPECT_TRUE(ValidateHandoffLayouts(p, Dcp(78, 4, 1)).ok());
}

TEST(HandoffLayoutsTest, RejectsWhatCannotWork) {
  auto msg = [](const Status& s) { return s.ToString(); };
  EXPECT_EQ(Pp({}).Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(msg(Pp({20, 0}).Validate()).find("PP rank 1 has no layers"), std::string::npos);
  EXPECT_NE(msg(Pp({2}, KvLayoutKind::kSplitKv, 7).Validate()).find("does not split into 2"), std::string::npos);
  EXPECT_NE(msg(Dcp(4, 0, 1).Validate()).find("dcp_ranks (W) is 0"), std::string::npos);
  EXPECT_NE(msg(Dcp(4, 2, 0).Validate()).find("interleave (I) is 0"), std::string::npos);
  EXPECT_NE(msg(ValidateHandoffLayouts(Pp({20, 20, 20, 18}), Dcp(80, 4, 1))).find("20/20/20/18 sums to 78"),
            std::string::npos);
  EXPECT_NE(msg(ValidateHandoffLayouts(Pp({4}), Dcp(4, 4, 1, KvLayoutKind::kSplitKv))).find("prefill stores latent"),
            std::string::npos);
  EXPECT_NE(msg(ValidateHandoffLayouts(Pp({4}), Dcp(4, 4, 1, KvLayoutKind::kLatent, 512))).find("576 B"),
            std::string::npos);
  PrefillLayout zero_block = Pp({4});
  zero_block.block_tokens = 0;
  EXPECT_EQ(zero_block.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::handoff
