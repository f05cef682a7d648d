#include "trace/agentx_loader.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_test_lines.h"

namespace kvpool::trace {
namespace {

using testing::RequestJson;
using testing::SubagentJson;
using testing::TraceJson;

Result<Corpus> Parse(const std::string& text, LoadOptions options = {}) {
  std::istringstream in(text);
  return ParseAgentX(in, "traces.jsonl", options);
}

TEST(AgentXLoader, ReadsRequestFields) {
  const std::string line = TraceJson(
      "t1", {RequestJson(0, {1, 2}), RequestJson(5, {1, 2, 3}, 64, "s", R"(,"input_types":["text"])")});
  Result<Corpus> corpus = Parse(line + "\n\n");  // blank lines are ignored
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  ASSERT_EQ(corpus->traces.size(), 1u);
  const Trace& t = corpus->traces[0];
  EXPECT_EQ(t.id, "t1");
  EXPECT_EQ(t.block_size, 64);
  EXPECT_EQ(t.tool_tokens, 100);
  EXPECT_EQ(t.system_tokens, 50);
  ASSERT_EQ(t.requests.size(), 2u);
  const Request& r = t.requests[1];
  EXPECT_EQ(r.start_time_s, 5);
  EXPECT_EQ(r.input_tokens, 192);
  EXPECT_EQ(r.output_tokens, 10);
  EXPECT_EQ(r.hash_ids, BlockIds({1, 2, 3}));
  EXPECT_EQ(r.type, RequestType::kStreaming);
  EXPECT_EQ(r.ttft_s, 0.2);
  EXPECT_EQ(r.stop_reason, "tool_use");
  EXPECT_EQ(r.api_time_s, 1);
  EXPECT_EQ(r.think_time_s, 0.5);
  EXPECT_EQ(r.input_types_json, R"(["text"])");
  EXPECT_EQ(t.requests[0].type, RequestType::kNormal);
  EXPECT_FALSE(t.requests[0].ttft_s.has_value());
  // The second prompt extends the first: they share storage.
  EXPECT_EQ(t.requests[0].hash_ids.storage(), r.hash_ids.storage());
}

TEST(AgentXLoader, SubagentsGateTheNextParentTurnOrRunInTheBackground) {
  const std::string line = TraceJson(
      "tree", {
                  RequestJson(0, {1}),
                  SubagentJson(2, "a", {RequestJson(2.1, {50}), RequestJson(3, {50, 51})}),
                  SubagentJson(2, "b", {RequestJson(2.2, {60})}),
                  RequestJson(10, {1, 2}),
                  RequestJson(20, {1, 2, 3}),
                  SubagentJson(21, "bg", {RequestJson(21.5, {70})}, "async_launched"),
              });
  Result<Corpus> corpus = Parse(line);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  const Trace& t = corpus->traces[0];
  ASSERT_EQ(t.requests.size(), 3u);
  ASSERT_EQ(t.subagents.size(), 3u);
  EXPECT_EQ(t.subagents[0].agent_id, "a");
  EXPECT_EQ(t.subagents[0].spawned_after_turn, 0u);
  EXPECT_EQ(t.subagents[0].gates_turn, 1u);
  EXPECT_EQ(t.subagents[0].requests.size(), 2u);
  EXPECT_EQ(t.subagents[0].tool_use_count, 2);
  EXPECT_EQ(t.subagents[1].spawned_after_turn, 0u);  // same fan-out as "a"
  EXPECT_EQ(t.subagents[1].gates_turn, 1u);
  EXPECT_EQ(t.subagents[2].spawned_after_turn, 2u);
  EXPECT_TRUE(t.subagents[2].background());
  EXPECT_EQ(t.subagents[2].status, SubagentStatus::kAsyncLaunched);
  EXPECT_FALSE(t.subagents[2].tool_use_count.has_value());
  EXPECT_EQ(t.TotalRequestCount(), 7u);
  EXPECT_EQ(corpus->dropped_subagents, 0);
}

TEST(AgentXLoader, DropsSubagentsWithNoPrecedingParentTurn) {
  const std::string line = TraceJson("t", {SubagentJson(0, "orphan", {RequestJson(0.1, {9})}), RequestJson(1, {1}),
                                           SubagentJson(2, "kept", {RequestJson(2.1, {8})})});
  Result<Corpus> corpus = Parse(line);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->dropped_subagents, 1);
  ASSERT_EQ(corpus->traces[0].subagents.size(), 1u);
  EXPECT_EQ(corpus->traces[0].subagents[0].agent_id, "kept");
}

TEST(AgentXLoader, SkipsTracesOverTheMaxContextAndCountsThem) {
  const std::string small = TraceJson("small", {RequestJson(0, {1, 2})});           // peak 128 + 10
  const std::string big = TraceJson("big", {RequestJson(0, {1}), RequestJson(1, {1, 2, 3, 4})});  // 256 + 10
  const std::string big_subagent =  // the peak may come from a subagent
      TraceJson("big-sub", {RequestJson(0, {1}), SubagentJson(1, "s", {RequestJson(1.5, {5, 6, 7, 8})})});
  LoadOptions options;
  options.max_context_tokens = 200;
  Result<Corpus> corpus = Parse(small + "\n" + big + "\n" + big_subagent + "\n", options);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  ASSERT_EQ(corpus->traces.size(), 1u);
  EXPECT_EQ(corpus->traces[0].id, "small");
  EXPECT_EQ(corpus->skipped_over_max_context, 2);

  options.max_context_tokens = 266;  // exactly the big traces' peak: kept
  corpus = Parse(small + "\n" + big + "\n" + big_subagent + "\n", options);
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(corpus->traces.size(), 3u);
  EXPECT_EQ(corpus->skipped_over_max_context, 0);
}

TEST(AgentXLoader, RequestsInTimeOrderInterleaveSubagents) {
  const std::string line = TraceJson("t", {RequestJson(0, {1}), SubagentJson(1, "a", {RequestJson(2, {5}), RequestJson(4, {5, 6})}),
                                           RequestJson(3, {1, 2})});
  Result<Corpus> corpus = Parse(line);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  std::vector<double> starts;
  for (const Request* r : corpus->traces[0].RequestsInTimeOrder()) starts.push_back(r->start_time_s);
  EXPECT_EQ(starts, (std::vector<double>{0, 2, 3, 4}));
}

// As real files record them: `in` past the last full block, timing fields missing.
TEST(AgentXLoader, AcceptsPartialTailBlocksAndMissingTimingFields) {
  std::string first = RequestJson(0, {1, 2});
  first.replace(first.find(R"("in":128)"), 8, R"("in":170)");  // 2 full blocks + a 42-token tail
  std::string second = RequestJson(5, {1, 2, 3}, 64, "s");
  for (const char* field : {R"("api_time":1,)", R"(,"think_time":0.5)", R"(,"ttft":0.2)"})
    second.erase(second.find(field), std::string(field).size());
  Result<Corpus> corpus = Parse(TraceJson("real", {first, second, RequestJson(9, {1, 2, 3, 4})}));
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  const Trace& t = corpus->traces[0];
  EXPECT_EQ(t.requests[0].input_tokens, 170);
  EXPECT_EQ(t.requests[0].hash_ids.size(), 2u);
  const Request& r = t.requests[1];
  EXPECT_EQ(r.type, RequestType::kStreaming);
  EXPECT_FALSE(r.api_time_s || r.think_time_s || r.ttft_s);
  // No api_time: the request "ends" when it starts, so the wait before the next one is the
  // gap between the two recorded start times.
  EXPECT_EQ(r.end_time_s(), 5);
  EXPECT_EQ(t.requests[2].start_time_s - r.end_time_s(), 4);
}

TEST(AgentXLoader, InvalidTracesAreSkippedUnlessStrict) {
  const std::string good = TraceJson("good", {RequestJson(0, {1})});
  std::string bad = TraceJson("bad", {RequestJson(0, {1}), RequestJson(1, {1, 2})});
  bad.replace(bad.find(R"("in":128)"), 8, R"("in":200)");  // floor(200 / 64) = 3 ids needed
  Result<Corpus> corpus = Parse(good + "\n" + bad + "\n" + good + "\n");
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->traces.size(), 2u);
  ASSERT_EQ(corpus->skipped_invalid.size(), 1u);
  EXPECT_EQ(corpus->skipped_invalid[0],
            "traces.jsonl:2: trace 'bad': request 1: 'hash_ids' has 2 ids but floor('in' (200) / block_size (64)) = 3");
  LoadOptions strict;
  strict.strict = true;
  Result<Corpus> failed = Parse(good + "\n" + bad + "\n", strict);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), corpus->skipped_invalid[0]);
}

}  // namespace
}  // namespace kvpool::trace
