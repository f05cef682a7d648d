#include "trace/trace_stats.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_loader.h"
#include "trace/agentx_test_lines.h"
#include "trace/trace_loader.h"

namespace kvpool::trace {
namespace {

using testing::RequestJson;
using testing::SubagentJson;
using testing::TraceJson;

TEST(Summarize, NearestRankPercentiles) {
  const Distribution d = Summarize({5, 1, 4, 2, 3, 6, 7, 8, 9, 10});
  EXPECT_EQ(d.count, 10);
  EXPECT_EQ(d.p50, 5);
  EXPECT_EQ(d.p90, 9);
  EXPECT_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(ComputeStats, CountsAndNewTokensOnAHandMadeCorpus) {
  const std::string text =
      TraceJson("a", {RequestJson(0, {1, 2}), SubagentJson(1, "s1", {RequestJson(3, {7})}),
                      SubagentJson(1, "s2", {RequestJson(3.5, {8})}), RequestJson(10, {1, 2, 3})}) +
      "\n" + TraceJson("b", {RequestJson(0, {1}), SubagentJson(2, "bg", {RequestJson(2.5, {1, 4})}, "async_launched")}) +
      "\n";
  std::istringstream in(text);
  Result<Corpus> corpus = ParseAgentX(in, "s.jsonl");
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  const TraceStats s = ComputeStats(*corpus);
  EXPECT_EQ(s.traces, 2);
  EXPECT_EQ(s.top_level_requests, 3);
  EXPECT_EQ(s.subagent_requests, 3);
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.subagents, 3);
  EXPECT_EQ(s.max_fan_out, 2);
  EXPECT_EQ(s.background_subagents, 1);
  // New tokens: a: 128, 64, 64, 64 (block 3); b: 64, 64 (block 4). Hits: a 2 of 7, b 1 of 3.
  EXPECT_EQ(s.new_tokens.count, 6);
  EXPECT_EQ(s.new_tokens.max, 128);
  EXPECT_EQ(s.ceiling.hit_blocks, 3);
  EXPECT_EQ(s.ceiling.total_blocks, 10);
  EXPECT_EQ(s.main_turns.max, 2);
  EXPECT_EQ(s.session_duration_s.max, 11);  // trace a: 0 to 10 + api_time 1
  EXPECT_EQ(s.last_input_tokens.max, 192);

  const nlohmann::json j = StatsToJson(s);
  EXPECT_EQ(j["requests"], 6);
  EXPECT_EQ(j["reuse_ceiling"]["hit_blocks"], 3);
  EXPECT_DOUBLE_EQ(j["reuse_ceiling"]["ratio"].get<double>(), 0.3);
  const std::string summary = FormatStatsText(s);
  EXPECT_NE(summary.find("2 traces, 6 requests (3 top-level, 3 in 3 subagents)"), std::string::npos) << summary;
  EXPECT_NE(summary.find("reuse ceiling 30.00%"), std::string::npos) << summary;
}

// The figures the sample's README gives, from an independent walk over the same files.
TEST(ComputeStats, TheRealSample) {
  Result<Corpus> corpus = LoadTraces(std::string(KVPOOL_TRACE_TESTDATA) + "/weka-sample", std::nullopt);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  StatsOptions options;
  options.max_context_tokens = 150'000;
  const TraceStats s = ComputeStats(*corpus, options);
  EXPECT_EQ(s.traces, 8);
  EXPECT_EQ(s.requests, 247);
  EXPECT_EQ(s.top_level_requests, 143);
  EXPECT_EQ(s.subagent_requests, 104);
  EXPECT_EQ(s.input_tokens.p50, 61'593);
  EXPECT_EQ(s.new_tokens.p50, 1'262);
  EXPECT_EQ(fmt::format("{:.2f}", 100 * s.ceiling.ratio()), "92.06");
  EXPECT_EQ(s.requests_missing_api_time, 7);
  EXPECT_EQ(s.requests_missing_think_time, 3);
  EXPECT_EQ(s.requests_missing_timing, 8);
  EXPECT_EQ(s.traces_over_max_context, 1);  // trace_0001 peaks at 197.9K tokens
  EXPECT_LT(s.token_ceiling(), s.ceiling.ratio());  // tails are input, never hits
  EXPECT_EQ(s.think_time_s.count, 244);
  EXPECT_EQ(s.gap_s.count, 247 - 8);  // every request but a trace's first
}

TEST(ComputeStats, QuantilesDrawTheDistribution) {
  const Distribution d = Summarize({4, 1, 3, 2}, 4);
  EXPECT_EQ(d.quantiles, (std::vector<double>{1, 1, 2, 3, 4}));
  EXPECT_TRUE(Summarize({4, 1}).quantiles.empty());
}

}  // namespace
}  // namespace kvpool::trace
