#include "trace/agentx_writer.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_loader.h"
#include "trace/agentx_test_lines.h"
#include "trace/corpus_synthesizer.h"

namespace kvpool::trace {
namespace {

using testing::RequestJson;
using testing::SubagentJson;
using testing::TraceJson;

Result<Corpus> Reload(const Corpus& corpus, std::string* text = nullptr) {
  std::ostringstream out;
  const Status s = WriteAgentX(corpus, out);
  if (!s.ok()) return s;
  if (text) *text = out.str();
  std::istringstream in(out.str());
  return ParseAgentX(in, "written.jsonl");
}

TEST(AgentXWriter, SynthesizedCorpusRoundTripsExactly) {
  SynthesisOptions options;
  options.traces = 12;
  options.turn_scale = 0.2;
  const Corpus corpus = SynthesizeCorpus(options, 42);
  std::string text;
  Result<Corpus> reloaded = Reload(corpus, &text);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  ASSERT_EQ(reloaded->traces.size(), corpus.traces.size());
  for (size_t i = 0; i < corpus.traces.size(); ++i) EXPECT_TRUE(reloaded->traces[i] == corpus.traces[i]) << i;
  EXPECT_TRUE(reloaded.value() == corpus);
  // And writing what was read gives the same bytes.
  std::string again;
  ASSERT_TRUE(Reload(reloaded.value(), &again).ok());
  EXPECT_EQ(again, text);
}

TEST(AgentXWriter, KeepsOpaqueFieldsAndSubagentPositions) {
  const std::string line = TraceJson(
      "t", {RequestJson(0, {1}, 64, "s", R"(,"input_types":{"text":3},"output_types":["tool_use"])"),
            SubagentJson(1, "a", {RequestJson(1.25, {5})}), RequestJson(2, {1, 2}),
            SubagentJson(3, "bg", {}, "async_launched")});
  std::istringstream in(line);
  Result<Corpus> corpus = ParseAgentX(in, "in.jsonl");
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  corpus->traces[0].totals_json = R"({"requests":3})";
  Result<Corpus> reloaded = Reload(*corpus);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
  EXPECT_TRUE(reloaded.value() == corpus.value());
  const Trace& t = reloaded->traces[0];
  EXPECT_EQ(t.requests[0].input_types_json, R"({"text":3})");
  EXPECT_EQ(t.requests[0].output_types_json, R"(["tool_use"])");
  EXPECT_EQ(t.totals_json, R"({"requests":3})");
  ASSERT_EQ(t.subagents.size(), 2u);
  EXPECT_EQ(t.subagents[0].gates_turn, 1u);
  EXPECT_TRUE(t.subagents[1].background());
}

TEST(AgentXWriter, RefusesAMooncakeCorpus) {
  Corpus corpus;
  corpus.format = TraceFormat::kMooncake;
  std::ostringstream out;
  EXPECT_FALSE(WriteAgentX(corpus, out).ok());
}

}  // namespace
}  // namespace kvpool::trace
