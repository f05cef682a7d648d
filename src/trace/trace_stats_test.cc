#include "trace/trace_stats.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_loader.h"
#include "trace/agentx_test_lines.h"

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

}  // namespace
}  // namespace kvpool::trace
