#include "replay/replay_metrics.h"

#include <gtest/gtest.h>

namespace kvpool::replay {
namespace {

engine::RequestRecord Done(double arrival, double first, double finish, uint64_t in, uint64_t out, uint64_t gpu,
                   uint64_t pool) {
  engine::RequestRecord r;
  r.arrival_s = arrival;
  r.admitted_s = arrival;
  r.first_token_s = first;
  r.finish_s = finish;
  r.input_tokens = in;
  r.output_tokens = out;
  r.gpu_cached_tokens = gpu;
  r.pool_tokens = pool;
  r.computed_tokens = in - gpu - pool;
  r.ceiling_hit_tokens = gpu + pool + 10;
  return r;
}

TEST(ReplayMetricsTest, ThroughputCountsAllPromptAndGeneratedTokensOverWindowAndGpus) {
  std::vector<engine::RequestRecord> records = {
      Done(10, 11, 20, 1000, 101, 800, 100),
      Done(12, 14, 30, 2000, 11, 1000, 900),
      Done(0, 1, 5, 5000, 10, 0, 0),     // finished before the window: left out
      Done(50, 51, 150, 5000, 10, 0, 0),  // after it: left out
  };
  records.push_back(records[0]);
  records.back().counted = false;  // warm-up: left out
  engine::RequestRecord failed = records[0];
  failed.failed = true;
  failed.failure = "waited too long";
  records.push_back(failed);
  const ReplaySummary s = Summarize(records, 10, 110, 8);
  EXPECT_EQ(s.requests, 2);
  EXPECT_EQ(s.uncounted_requests, 1);
  EXPECT_EQ(s.failed_requests, 1);
  EXPECT_EQ(s.first_failure, "waited too long");
  EXPECT_DOUBLE_EQ(s.window_s, 100);
  EXPECT_DOUBLE_EQ(s.throughput_tok_s, (3000.0 + 112) / 100);
  EXPECT_DOUBLE_EQ(s.throughput_tok_s_per_gpu, s.throughput_tok_s / 8);
  EXPECT_DOUBLE_EQ(s.gpu_share(), 1800.0 / 3000);
  EXPECT_DOUBLE_EQ(s.pool_share(), 1000.0 / 3000);
  EXPECT_DOUBLE_EQ(s.computed_share(), 200.0 / 3000);
  EXPECT_DOUBLE_EQ(s.ceiling(), 2820.0 / 3000);
  EXPECT_DOUBLE_EQ(s.ttft_s.max, 2);
  EXPECT_DOUBLE_EQ(s.user_gen_tok_s.max, 100.0 / 9);  // 100 tokens after the first in 9 s
}

TEST(ReplayMetricsTest, PercentilesPickNearestRanks) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Percentiles p = ComputePercentiles(v);
  EXPECT_EQ(p.count, 100);
  EXPECT_NEAR(p.p50, 50, 1);
  EXPECT_NEAR(p.p90, 90, 1);
  EXPECT_EQ(p.max, 100);
  EXPECT_EQ(ComputePercentiles({}).count, 0);
}

TEST(ReplayMetricsTest, JsonAndTextCarryTheHeadlineNumbers) {
  std::vector<engine::RequestRecord> records = {Done(10, 11, 20, 1000, 101, 800, 100)};
  records[0].verification_errors = 0;
  ReplaySummary s = Summarize(records, 0, 100, 8);
  s.mode = "pool";
  const nlohmann::json j = SummaryToJson(s);
  EXPECT_EQ(j["mode"], "pool");
  EXPECT_DOUBLE_EQ(j["token_sources"]["pool_share"].get<double>(), 0.1);
  EXPECT_EQ(j["verification_errors"], 0);
  EXPECT_NE(FormatSummary(s).find("tok/s per GPU"), std::string::npos);
}

}  // namespace
}  // namespace kvpool::replay
