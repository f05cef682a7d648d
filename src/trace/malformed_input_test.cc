// Malformed input is an error that names file, line and field; never a crash.
#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_loader.h"
#include "trace/agentx_test_lines.h"
#include "trace/mooncake_loader.h"

namespace kvpool::trace {
namespace {

using testing::RequestJson;
using testing::SubagentJson;
using testing::TraceJson;

// Strict: the first invalid trace is the error (the messages are those a skip reports).
Status ParseAgentXText(const std::string& text) {
  std::istringstream in(text);
  LoadOptions strict;
  strict.strict = true;
  return ParseAgentX(in, "traces.jsonl", strict).status();
}
Status ParseMooncakeText(const std::string& text) {
  std::istringstream in(text);
  return ParseMooncake(in, "mooncake.jsonl").status();
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

TEST(MalformedAgentX, ErrorsNameFileLineAndField) {
  const std::string good = TraceJson("t", {RequestJson(0, {1}), RequestJson(1, {1, 2}), RequestJson(2, {1, 2, 3}),
                                           RequestJson(3, {1, 2, 3, 4})});
  ASSERT_TRUE(ParseAgentXText(good).ok());
  const std::string prefix = good + "\n\n" + good + "\n";  // the bad trace is on line 4
  struct Case {
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Replace(good, R"("in":256)", R"("in":300)"), ""},  // a partial tail block: 4 full blocks, valid
      {Replace(good, R"("in":256)", R"("in":1000)"),
       "traces.jsonl:4: trace 't': request 3: 'hash_ids' has 4 ids but floor('in' (1000) / block_size (64)) = 15"},
      {Replace(good, R"("in":256)", R"("in":250)"),
       "traces.jsonl:4: trace 't': request 3: 'hash_ids' has 4 ids but floor('in' (250) / block_size (64)) = 3"},
      {Replace(good, R"("hash_id_scope":"local")", R"("hash_id_scope":"global")"),
       "traces.jsonl:4: trace 't': 'hash_id_scope' is \"global\"; only \"local\""},
      {Replace(good, R"("in":256)", R"("in":"abc")"),
       "traces.jsonl:4: trace 't': request 3: 'in' must be a non-negative integer, got \"abc\""},
      {Replace(good, R"("in":256)", R"("in":-64)"), "request 3: 'in' must be a non-negative integer, got -64"},
      {Replace(good, R"("in":256)", R"("in":256.5)"), "request 3: 'in' must be a non-negative integer"},
      {Replace(good, R"("block_size":64)", R"("block_size":0)"),
       "traces.jsonl:4: trace 't': 'block_size' must be positive"},
      {Replace(good, R"("id":"t",)", ""), "traces.jsonl:4: missing 'id'"},
      {Replace(good, R"("t":2,)", R"("t":0.5,)"),
       "traces.jsonl:4: trace 't': request 2: 't' (0.5) is earlier than the previous"},
      {Replace(good, R"("api_time":1,)", ""), ""},  // real files miss timing fields at times
      {Replace(good, R"(,"think_time":0.5)", ""), ""},
      {Replace(good, R"("api_time":1,)", R"("api_time":null,)"), ""},
      {Replace(good, R"("api_time":1,)", R"("api_time":-1,)"), "request 0: 'api_time' must be a non-negative number"},
      {Replace(good, R"("api_time":1,)", R"("api_time":"1",)"), "request 0: 'api_time' must be a non-negative number"},
      {Replace(good, R"("type":"n","t":3)", R"("type":"x","t":3)"), "request 3: 'type' must be \"n\", \"s\" or \"subagent\""},
      {Replace(good, R"("hash_ids":[1,2,3,4])", R"("hash_ids":[1,2,-3,4])"), "request 3: 'hash_ids'[2] must be a non-negative integer"},
      {Replace(good, R"("requests":[)", R"("requests":7,"x":[)"),
       "traces.jsonl:4: trace 't': 'requests' must be a list, got 7"},
      {TraceJson("t", {RequestJson(0, {1}, 64, "s")}), ""},  // a valid streaming request
      {Replace(TraceJson("t", {RequestJson(0, {1}, 64, "s")}), R"(,"ttft":0.2)", ""), ""},  // as in real files
      {Replace(TraceJson("t", {RequestJson(0, {1}, 64, "s")}), R"(,"ttft":0.2)", R"(,"ttft":"x")"),
       "request 0: 'ttft' must be a non-negative number"},
      {TraceJson("t", {RequestJson(0, {1}), SubagentJson(1, "a", {RequestJson(1, {2})}, "done")}),
       "request 1: 'status' must be \"completed\" or \"async_launched\""},
      {TraceJson("t", {RequestJson(0, {1}), SubagentJson(1, "a", {RequestJson(1, {2}, 64, "n", ",\"in\":3")})}),
       "traces.jsonl:4: "},  // duplicate key: nlohmann keeps the last value, floor(3 / 64) = 0 ids
      {TraceJson("t", {RequestJson(0, {1}), SubagentJson(1, "a", {SubagentJson(1, "b", {})})}),
       "traces.jsonl:4: trace 't': request 1 (subagent) request 0: nested subagents are not supported"},
      {TraceJson("t", {SubagentJson(1, "a", {RequestJson(1, {2})})}), "traces.jsonl:4: trace 't': no main-thread requests"},
      {"[1,2,3]", "traces.jsonl:4: a trace must be a JSON object, got [1,2,3]"},
      {good.substr(0, good.size() / 2), "traces.jsonl:4: not valid JSON: "},
      {"\x01\xff garbage", "traces.jsonl:4: not valid JSON: "},
  };
  for (const Case& c : cases) {
    const Status status = ParseAgentXText(prefix + c.line + "\n");
    if (c.message.empty()) {
      EXPECT_TRUE(status.ok()) << status.ToString();
      continue;
    }
    ASSERT_FALSE(status.ok()) << c.line;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(c.message), std::string::npos)
        << "got: " << status.message() << "\nwant: " << c.message;
  }
}

TEST(MalformedAgentX, EmptyInputIsAnError) {
  EXPECT_FALSE(ParseAgentXText("").ok());
  EXPECT_FALSE(ParseAgentXText("\n  \n").ok());
}

// Every truncation of a valid line and many random byte corruptions: each must give either
// a valid corpus or an error naming the line, and never crash (run under ASan in CI).
TEST(MalformedAgentX, TruncatedAndCorruptedLinesNeverCrash) {
  const std::string good =
      TraceJson("t", {RequestJson(0, {1}), SubagentJson(1, "a", {RequestJson(1.5, {7, 8}, 64, "s")}),
                      RequestJson(3, {1, 2}, 64, "s"), SubagentJson(4, "bg", {}, "async_launched")});
  ASSERT_TRUE(ParseAgentXText(good).ok());
  size_t errors = 0;
  for (size_t cut = 0; cut < good.size(); ++cut) {
    const Status status = ParseAgentXText("\n" + good.substr(0, cut) + "\n");
    if (cut == 0) continue;  // an empty line: "no traces"
    ASSERT_FALSE(status.ok()) << "cut at " << cut;
    EXPECT_EQ(status.message().rfind("traces.jsonl:2: ", 0), 0u) << status.message();
    ++errors;
  }
  EXPECT_EQ(errors, good.size() - 1);

  uint64_t state = 12345;  // a fixed LCG: a failure replays exactly
  const auto next = [&state] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  const std::string alphabet = "{}[]\":,0123456789-.eE ntfrsul\\\x80\xff";
  for (int round = 0; round < 2000; ++round) {
    std::string line = good;
    for (int edits = 1 + int(next() % 4); edits > 0; --edits)
      line[next() % line.size()] = alphabet[next() % alphabet.size()];
    const Status status = ParseAgentXText(line);
    if (!status.ok()) {
      EXPECT_EQ(status.message().rfind("traces.jsonl:1: ", 0), 0u) << status.message();
    }
  }
}

TEST(MalformedMooncake, ErrorsNameFileLineAndField) {
  const std::string good = R"({"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]})";
  ASSERT_TRUE(ParseMooncakeText(good).ok());
  struct Case {
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1]})",
       "mooncake.jsonl:2: 'hash_ids' has 1 ids but 'input_length' (600) needs ceil(600 / 512) = 2"},
      {R"({"timestamp": 4, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]})",
       "mooncake.jsonl:2: 'timestamp' (4) is earlier than the previous request's (5)"},
      {R"({"timestamp": 6, "input_length": 600, "hash_ids": [1, 2]})", "mooncake.jsonl:2: missing 'output_length'"},
      {R"({"timestamp": 6, "input_length": 600, "output_length": 3, "hash_ids": "1,2"})",
       "mooncake.jsonl:2: 'hash_ids' must be a list of integers"},
      {R"({"timestamp": 6, "input_length)", "mooncake.jsonl:2: not valid JSON"},
  };
  for (const Case& c : cases) {
    const Status status = ParseMooncakeText(good + "\n" + c.line + "\n");
    ASSERT_FALSE(status.ok()) << c.line;
    EXPECT_NE(status.message().find(c.message), std::string::npos)
        << "got: " << status.message() << "\nwant: " << c.message;
  }
}

}  // namespace
}  // namespace kvpool::trace
