#include "handoff/handoff_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "handoff/test_handoff_caches.h"

namespace kvpool::handoff {
namespace {

// The design's example: an 8,192-token chunk of a 20-layer stage at 576 B per token-layer into
// DCP4 is ~94 MB from that stage, in 3 writes of <= 8 MiB per decode rank (12 in all) instead of
// 163,840 per-token-per-layer writes.
TEST(HandoffPlanTest, PublishedExample) {
  PrefillLayout p;
  p.stage_layers = {20, 20, 20, 18};
  p.bytes_per_token_per_layer = 576;
  p.block_tokens = 64;
  DecodeLayout d;
  d.num_layers = 78;
  d.bytes_per_token_per_layer = 576;
  d.block_tokens = 64;
  d.dcp_ranks = 4;
  auto plan = PlanHandoff(p, d, 8192, 16384);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->rank_bytes(0), 94'371'840u);
  EXPECT_EQ(plan->rank_writes(0), 12u);
  const PairPlan& pair = plan->pair(1, 2);
  EXPECT_EQ(pair.first_layer, 20u);
  EXPECT_EQ(pair.first_local, 2048u);
  EXPECT_EQ(pair.num_tokens, 2048u);
  EXPECT_EQ(pair.GlobalToken(0), 8194u);
  EXPECT_EQ(pair.bytes(), 20u * 2048 * 576);
  for (const HandoffWrite& w : pair.writes) EXPECT_LE(w.length, kDefaultMaxWriteBytes);
  EXPECT_EQ(plan->total_bytes(), 8192u * 78 * 576);
  EXPECT_EQ(plan->pair(3, 0).num_layers, 18u);
}

// For random layouts: pairs are in p * W + d order; every pair's writes tile its buffer exactly
// (contiguous, row-aligned, each <= max_write_bytes, as few as possible); the pairs' tokens
// partition the range; bytes add up.
TEST(HandoffPlanTest, RandomLayoutsTileEveryBuffer) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 500; ++iter) {
    const testing::RandomCase c = testing::MakeRandomCase(rng);
    const uint32_t row = c.decode.RankLayout().plane_token_bytes();
    HandoffPlanOptions opt;
    opt.max_write_bytes = row + rng() % (row * 50);
    auto plan = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token, opt);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(plan->pairs.size(), uint64_t{c.prefill.num_ranks()} * c.decode.dcp_ranks);
    uint64_t tokens_of_rank0 = 0;
    for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
      for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
        const PairPlan& pair = plan->pair(p, d);
        ASSERT_EQ(pair.prefill_rank, p);
        ASSERT_EQ(pair.decode_rank, d);
        ASSERT_EQ(pair.first_layer, c.prefill.first_layer(p));
        if (p == 0) tokens_of_rank0 += pair.num_tokens;
        uint64_t next = 0, rows = 0;
        for (const HandoffWrite& w : pair.writes) {
          ASSERT_EQ(w.offset, next);
          ASSERT_EQ(w.first_row, rows);
          ASSERT_EQ(w.length, w.num_rows * row);
          ASSERT_GT(w.length, 0u);
          ASSERT_LE(w.length, opt.max_write_bytes);
          next += w.length;
          rows += w.num_rows;
        }
        ASSERT_EQ(next, pair.bytes());
        const uint64_t max_rows = opt.max_write_bytes / row;
        ASSERT_EQ(pair.writes.size(), (pair.num_rows() + max_rows - 1) / max_rows);
        // Its tokens are exactly d's tokens in the range, ascending.
        for (uint64_t j = 0; j < pair.num_tokens; ++j) {
          const uint64_t g = pair.GlobalToken(j);
          ASSERT_GE(g, c.first_token);
          ASSERT_LT(g, c.end_token);
          ASSERT_EQ(c.decode.token_map().Owner(g), d);
          if (j > 0) {
            ASSERT_GT(g, pair.GlobalToken(j - 1));
          }
        }
      }
    }
    ASSERT_EQ(tokens_of_rank0, c.end_token - c.first_token);
    ASSERT_EQ(plan->total_bytes(),
              (c.end_token - c.first_token) * c.decode.num_layers * c.decode.bytes_per_token_per_layer);
  }
}

TEST(HandoffPlanTest, RejectsBadRequests) {
  PrefillLayout p;
  p.stage_layers = {2};
  p.bytes_per_token_per_layer = 576;
  DecodeLayout d;
  d.num_layers = 2;
  d.bytes_per_token_per_layer = 576;
  d.dcp_ranks = 2;
  EXPECT_EQ(PlanHandoff(p, d, 5, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanHandoff(p, d, 6, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanHandoff(p, d, 0, 5, {.max_write_bytes = 575}).status().code(), StatusCode::kInvalidArgument);
  d.num_layers = 3;
  EXPECT_EQ(PlanHandoff(p, d, 0, 5).status().code(), StatusCode::kInvalidArgument);
}

TEST(HandoffPlanTest, ARankWithNoTokensInTheRangeMovesNothing) {
  PrefillLayout p;
  p.stage_layers = {3};
  p.bytes_per_token_per_layer = 64;
  DecodeLayout d;
  d.num_layers = 3;
  d.bytes_per_token_per_layer = 64;
  d.dcp_ranks = 4;
  d.interleave = 16;
  auto plan = PlanHandoff(p, d, 16, 20);  // all four tokens are rank 1's
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pair(0, 0).num_tokens, 0u);
  EXPECT_TRUE(plan->pair(0, 0).writes.empty());
  EXPECT_EQ(plan->pair(0, 1).num_tokens, 4u);
  EXPECT_EQ(plan->pair(0, 1).first_local, 0u);
  EXPECT_EQ(plan->total_writes(), 1u);
}

}  // namespace
}  // namespace kvpool::handoff
