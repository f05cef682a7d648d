#include "engine/cost_model.h"
#include "engine/topology.h"

#include <gtest/gtest.h>

namespace kvpool::engine {
namespace {

CostModel Published() { return CostModel(CostModelParams::Published(), GeometryPreset("published").value()); }

TEST(CostModelTest, PrefillGrowsLinearlyInNewTokensAndWithContext) {
  const CostModel m = Published();
  const PrefillSlice short_ctx[] = {{0, 2000}};
  const PrefillSlice long_ctx[] = {{140'000, 142'000}};
  const PrefillSlice twice[] = {{140'000, 144'000}};
  EXPECT_LT(m.PrefillIterationSeconds(short_ctx), m.PrefillIterationSeconds(long_ctx));
  EXPECT_GT(m.PrefillIterationSeconds(twice), 1.9 * m.PrefillIterationSeconds(long_ctx) - 0.02);
}

TEST(CostModelTest, TypicalTurnAndColdPromptTakePlausibleTimes) {
  const CostModel m = Published();
  const PrefillSlice turn[] = {{138'300, 140'000}};  // the median 1.7K new tokens
  const double t = m.PrefillIterationSeconds(turn);
  EXPECT_GT(t, 0.05);
  EXPECT_LT(t, 0.4);
  double cold = 0;  // a cold 140K prompt in 8K-token iterations
  for (uint64_t s = 0; s < 140'000; s += 8192) {
    const PrefillSlice it[] = {{s, std::min<uint64_t>(140'000, s + 8192)}};
    cold += m.PrefillIterationSeconds(it);
  }
  EXPECT_GT(cold, 2);
  EXPECT_LT(cold, 10);
}

TEST(CostModelTest, PipelineStagesShareTheBusiestStagesTimeByLayersAndTensorParallelIsOneStage) {
  ModelGeometry g = GeometryPreset("published").value();  // 20/20/20/18 layers
  const PrefillSlice chunk[] = {{100'000, 108'192}};
  const CostModel pp(CostModelParams::Published(), g);
  EXPECT_DOUBLE_EQ(pp.PrefillStageSeconds(0, chunk), pp.PrefillIterationSeconds(chunk));
  EXPECT_DOUBLE_EQ(pp.PrefillStageSeconds(3, chunk), pp.PrefillIterationSeconds(chunk) * 18 / 20);
  EXPECT_EQ(g.prefill_pipeline_depth(), 4u);
  g.prefill_tensor_parallel = true;
  const CostModel tp(CostModelParams::Published(), g);
  EXPECT_EQ(g.prefill_pipeline_depth(), 1u);
  EXPECT_DOUBLE_EQ(tp.PrefillStageSeconds(0, chunk), tp.PrefillIterationSeconds(chunk));
}

TEST(CostModelTest, DecodeStepGrowsWithBatchAndContext) {
  const CostModel m = Published();
  EXPECT_LT(m.DecodeStepSeconds(1, 100'000), m.DecodeStepSeconds(50, 100'000));
  EXPECT_LT(m.DecodeStepSeconds(50, 100'000), m.DecodeStepSeconds(50, 8'000'000));
  // The published operating point: ~55 sequences, 8M tokens of KV -> 20-40 tok/s per user.
  const double step = m.DecodeStepSeconds(55, 8'000'000);
  EXPECT_GT(1 / step, 15);
  EXPECT_LT(1 / step, 40);
}

TEST(CostModelTest, RestoreOfATypicalHistoryMatchesThePublishedMedian) {
  const CostModel m = Published();
  // 120K tokens on a 20-layer stage: the published 150-220 ms.
  const double t = m.StageRestoreSeconds(0, 120'000);
  EXPECT_GT(t, 0.15);
  EXPECT_LT(t, 0.22);
  // The 18-layer stage is faster; nothing restored costs nothing.
  EXPECT_LT(m.StageRestoreSeconds(3, 120'000), t);
  EXPECT_EQ(m.StageRestoreSeconds(0, 0), 0);
}

// Chunks read from the SSD tier go at its share of the drives' rate, the rest as before.
TEST(CostModelTest, ChunksFromSsdGoAtTheSsdsRate) {
  const CostModel m = Published();
  const double dram = m.StageRestoreSeconds(0, 120'000);
  const double ssd = m.StageRestoreSeconds(0, 120'000, 120'000);
  const double half = m.StageRestoreSeconds(0, 120'000, 60'000);
  const double fixed = m.params().restore_fixed_s;
  EXPECT_NEAR((ssd - fixed) / (dram - fixed),
              m.params().restore_bytes_per_s_per_gpu / m.params().ssd_read_bytes_per_s_per_gpu, 1e-9);
  EXPECT_NEAR(half, (dram + ssd) / 2, 1e-9);
}

TEST(CostModelTest, ScaledGeometryKeepsPublishedTimes) {
  const CostModel published = Published();
  const CostModel scaled(CostModelParams::Published(), GeometryPreset("scaled").value());
  EXPECT_DOUBLE_EQ(published.StageRestoreSeconds(1, 50'000), scaled.StageRestoreSeconds(1, 50'000));
  EXPECT_DOUBLE_EQ(published.HandoffSeconds(50'000), scaled.HandoffSeconds(50'000));
}

TEST(ModelGeometryTest, PresetsKeepThePublishedRatios) {
  const ModelGeometry published = GeometryPreset("published").value();
  const ModelGeometry scaled = GeometryPreset("scaled").value();
  EXPECT_EQ(published.bytes_per_token(), 48'672u);
  EXPECT_EQ(published.spec.total_layers(), 78u);
  EXPECT_EQ(Topology::Uniform(1).total_gpus(published), 8);
  EXPECT_TRUE(published.Validate().ok());
  EXPECT_TRUE(scaled.Validate().ok());
  EXPECT_EQ(scaled.reference_bytes_per_token(), 48'672u);
  // Same tokens everywhere, far fewer bytes.
  EXPECT_EQ(scaled.prefill_cache_tokens, published.prefill_cache_tokens);
  EXPECT_EQ(scaled.pool_tokens, published.pool_tokens);
  EXPECT_LT(scaled.pool_bytes(), uint64_t{1} << 30);
  // ~0.4 TiB of prefill GPU KV and ~1 TiB+ of pool at the published bytes.
  EXPECT_NEAR(double(published.prefill_cache_tokens * published.bytes_per_token()) / (1ull << 40), 0.4, 0.05);
  EXPECT_GT(double(published.pool_bytes()) / (1ull << 40), 1.0);
  EXPECT_FALSE(GeometryPreset("huge").ok());
}

}  // namespace
}  // namespace kvpool::engine
