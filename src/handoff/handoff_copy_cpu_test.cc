#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "handoff/handoff_copy.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/test_handoff_caches.h"

namespace kvpool::handoff {
namespace {

using testing::ExpectedDecodePlanes;
using testing::HostScenario;
using testing::KvByte;

// Moves a whole plan on the CPU: for every pair, gather then scatter — either the whole buffer
// at once, or piece by piece through one landing buffer of max_write_bytes (as the GPU pipeline
// does).
void MoveAll(const HandoffPlan& plan, HostScenario& s, bool piecewise) {
  std::vector<std::byte> buffer, landing(plan.max_write_bytes);
  for (const PairPlan& pair : plan.pairs) {
    const PagedKvCache& src = s.prefill[pair.prefill_rank].cache();
    const PagedKvCache& dst = s.decode[pair.decode_rank].cache();
    const auto& src_table = s.prefill_tables[pair.prefill_rank];
    const auto& dst_table = s.decode_tables[pair.decode_rank];
    if (piecewise) {
      for (const HandoffWrite& w : pair.writes) {
        ASSERT_TRUE(GatherCpu(pair, src, src_table, landing.data(), &w).ok());
        ASSERT_TRUE(ScatterCpu(pair, landing.data(), dst, dst_table, &w).ok());
      }
    } else {
      buffer.assign(pair.bytes(), std::byte{0});
      ASSERT_TRUE(GatherCpu(pair, src, src_table, buffer.data()).ok());
      ASSERT_TRUE(ScatterCpu(pair, buffer.data(), dst, dst_table).ok());
    }
  }
}

// The property: for random PP sizes and layer splits, W in 1..8, interleaves, block sizes,
// latent and K/V-split, strided blocks, shuffled block ids and ranges not starting at 0, every
// token-layer's bytes land at exactly the owner's (rank, block, slot) — and no other byte of any
// decode cache changes (they start as random sentinels).
TEST(HandoffCopyCpuTest, EveryTokenLayerLandsExactlyWhereItBelongs) {
  std::mt19937_64 rng(2024);
  for (int iter = 0; iter < 300; ++iter) {
    const testing::RandomCase c = testing::MakeRandomCase(rng);
    HostScenario s = testing::MakeHostScenario(c, rng);
    const auto want = ExpectedDecodePlanes(s);
    const uint32_t row = c.decode.RankLayout().plane_token_bytes();
    const bool piecewise = iter % 2 == 1;
    HandoffPlanOptions opt;
    if (piecewise) opt.max_write_bytes = row * (1 + rng() % 40);
    auto plan = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token, opt);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    MoveAll(*plan, s, piecewise);
    for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
      for (size_t p = 0; p < want[d].size(); ++p) {
        ASSERT_TRUE(s.decode[d].planes()[p] == want[d][p])
            << "iter " << iter << ": decode rank " << d << " plane " << p << " (W=" << c.decode.dcp_ranks
            << " I=" << c.decode.interleave << " range [" << c.first_token << ", " << c.end_token << "))";
      }
    }
  }
}

// The gather buffer's order is [layer of p][plane][d's tokens ascending].
TEST(HandoffCopyCpuTest, GatherBufferOrder) {
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 50; ++iter) {
    const testing::RandomCase c = testing::MakeRandomCase(rng);
    HostScenario s = testing::MakeHostScenario(c, rng);
    auto plan = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token);
    ASSERT_TRUE(plan.ok());
    const uint32_t p = static_cast<uint32_t>(rng() % c.prefill.num_ranks());
    const uint32_t d = static_cast<uint32_t>(rng() % c.decode.dcp_ranks);
    const PairPlan& pair = plan->pair(p, d);
    std::vector<std::byte> buffer(pair.bytes());
    ASSERT_TRUE(GatherCpu(pair, s.prefill[p].cache(), s.prefill_tables[p], buffer.data()).ok());
    const std::byte* b = buffer.data();
    for (uint32_t layer = 0; layer < pair.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < pair.planes_per_layer; ++plane) {
        for (uint64_t j = 0; j < pair.num_tokens; ++j) {
          for (uint32_t i = 0; i < pair.plane_token_bytes; ++i, ++b) {
            ASSERT_EQ(*b, KvByte(pair.first_layer + layer, plane, pair.GlobalToken(j), i));
          }
        }
      }
    }
  }
}

// A small fixed scenario for the bad-input tests.
struct Fixture {
  PrefillLayout prefill;
  DecodeLayout decode;
  std::unique_ptr<testing::HostCache> src, dst;
  std::vector<BlockId> src_table, dst_table;
  HandoffPlan plan;

  Fixture() {
    prefill.stage_layers = {2, 2};
    prefill.bytes_per_token_per_layer = 64;
    prefill.block_tokens = 4;
    decode.num_layers = 4;
    decode.bytes_per_token_per_layer = 64;
    decode.block_tokens = 4;
    decode.dcp_ranks = 2;
    src = std::make_unique<testing::HostCache>(prefill.RankLayout(1), 8);
    dst = std::make_unique<testing::HostCache>(decode.RankLayout(), 4);
    src_table = {7, 6, 5, 4};  // 16 tokens
    dst_table = {3, 1};        // 8 local tokens
    plan = PlanHandoff(prefill, decode, 4, 16).value();
  }
  const PairPlan& pair() const { return plan.pair(1, 1); }
};

TEST(HandoffCopyCpuTest, BadBlockIdsAreInvalidArgumentNotWrites) {
  Fixture f;
  std::vector<std::byte> buffer(f.pair().bytes());
  ASSERT_TRUE(GatherCpu(f.pair(), f.src->cache(), f.src_table, buffer.data()).ok());
  ASSERT_TRUE(ScatterCpu(f.pair(), buffer.data(), f.dst->cache(), f.dst_table).ok());
  auto bad_src = f.src_table;
  bad_src[2] = 8;  // == num_blocks
  EXPECT_EQ(GatherCpu(f.pair(), f.src->cache(), bad_src, buffer.data()).code(), StatusCode::kInvalidArgument);
  bad_src[2] = -1;
  EXPECT_EQ(GatherCpu(f.pair(), f.src->cache(), bad_src, buffer.data()).code(), StatusCode::kInvalidArgument);
  const auto before = f.dst->planes();
  auto bad_dst = f.dst_table;
  bad_dst[1] = 1000;
  const Status st = ScatterCpu(f.pair(), buffer.data(), f.dst->cache(), bad_dst);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("block 1000"), std::string::npos) << st.ToString();
  EXPECT_TRUE(f.dst->planes() == before) << "a rejected scatter wrote nothing";
  // A bad id in a block the pair never touches is not its business: rank 1's tokens in
  // [4, 16) are local [2, 8), blocks 0 and 1; block table entries past them are unused.
  auto longer = f.dst_table;
  longer.push_back(-5);
  EXPECT_TRUE(ScatterCpu(f.pair(), buffer.data(), f.dst->cache(), longer).ok());
}

TEST(HandoffCopyCpuTest, RangeBeyondTheBlockTable) {
  Fixture f;
  std::vector<std::byte> buffer(f.pair().bytes());
  const std::vector<BlockId> short_src = {7, 6, 5};  // covers 12 of 16 tokens
  const Status g = GatherCpu(f.pair(), f.src->cache(), short_src, buffer.data());
  EXPECT_EQ(g.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.message().find("block table has 3"), std::string::npos) << g.ToString();
  const std::vector<BlockId> short_dst = {3};  // covers 4 of 8 local tokens
  EXPECT_EQ(ScatterCpu(f.pair(), buffer.data(), f.dst->cache(), short_dst).code(), StatusCode::kInvalidArgument);
}

TEST(HandoffCopyCpuTest, WrongCacheOrPieceIsRejected) {
  Fixture f;
  std::vector<std::byte> buffer(f.pair().bytes());
  // Pair (1, 1)'s gather against the decode cache as if it were the prefill cache: 4 layers, not 2.
  EXPECT_EQ(GatherCpu(f.pair(), f.dst->cache(), f.src_table, buffer.data()).code(), StatusCode::kInvalidArgument);
  // Decode cache with another block size.
  PagedKvLayout other = f.decode.RankLayout();
  other.block_tokens = 8;
  testing::HostCache odd(other, 4);
  EXPECT_EQ(ScatterCpu(f.pair(), buffer.data(), odd.cache(), f.dst_table).code(), StatusCode::kInvalidArgument);
  // A piece that is not one of the pair's writes.
  HandoffWrite bogus{0, 64, 5, 1};
  EXPECT_EQ(GatherCpu(f.pair(), f.src->cache(), f.src_table, buffer.data(), &bogus).code(),
            StatusCode::kInvalidArgument);
  // And no buffer.
  EXPECT_EQ(GatherCpu(f.pair(), f.src->cache(), f.src_table, nullptr).code(), StatusCode::kInvalidArgument);
}

// Without a GPU (or without KVPOOL_CUDA) the CUDA entry points say UNAVAILABLE, so a caller
// can fall back to the CPU path.
TEST(HandoffCopyCpuTest, WithoutAGpuTheCudaPathIsUnavailable) {
  if (HandoffCudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present: tests/gpu covers the CUDA path";
  Fixture f;
  EXPECT_EQ(HandoffPipeline::Create(0, 0).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(DeviceKvTable::Upload(f.src->cache(), f.src_table, 0).status().code(), StatusCode::kUnavailable);
}

// The pipeline's copy submissions: every piece exactly once; the first and last alone; none
// larger than half the slots (so a batch never holds one slot twice).
TEST(HandoffCopyCpuTest, BatchSizesCoverEveryPieceOnce) {
  EXPECT_TRUE(HandoffBatchSizes(0, 8).empty());
  EXPECT_EQ(HandoffBatchSizes(1, 8), (std::vector<size_t>{1}));
  EXPECT_EQ(HandoffBatchSizes(2, 8), (std::vector<size_t>{1, 1}));
  EXPECT_EQ(HandoffBatchSizes(12, 8), (std::vector<size_t>{1, 2, 4, 2, 2, 1}));  // the published example
  EXPECT_EQ(HandoffBatchSizes(12, 4), (std::vector<size_t>{1, 2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(HandoffBatchSizes(5, 3), (std::vector<size_t>{1, 1, 1, 1, 1}));
  for (uint32_t slots = 1; slots <= 9; ++slots) {
    for (size_t pieces = 1; pieces <= 40; ++pieces) {
      const std::vector<size_t> sizes = HandoffBatchSizes(pieces, slots);
      size_t total = 0;
      for (size_t n : sizes) {
        EXPECT_GE(n, 1u);
        EXPECT_LE(n, std::max<size_t>(1, slots / 2));
        total += n;
      }
      EXPECT_EQ(total, pieces);
      EXPECT_EQ(sizes.front(), 1u);
      EXPECT_EQ(sizes.back(), 1u);
    }
  }
}

}  // namespace
}  // namespace kvpool::handoff
