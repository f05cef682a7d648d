#include "trace/corpus_synthesizer.h"

#include <gtest/gtest.h>

#include "trace/agentx_writer.h"
#include "trace/trace_stats.h"

namespace kvpool::trace {
namespace {

// Times are rounded to milliseconds, so a sum of two of them may be off by a rounding error.
constexpr double kTimeSlackS = 1e-6;

SynthesisOptions Small() {
  SynthesisOptions options;
  options.traces = 20;
  options.turn_scale = 0.25;
  return options;
}

std::string Bytes(const Corpus& corpus) {
  std::string text;
  for (const Trace& t : corpus.traces) text += AgentXTraceLine(t) + "\n";
  return text;
}

TEST(SynthesizeCorpus, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string a = Bytes(SynthesizeCorpus(Small(), 7));
  EXPECT_EQ(a, Bytes(SynthesizeCorpus(Small(), 7)));
  EXPECT_NE(a, Bytes(SynthesizeCorpus(Small(), 8)));
}

TEST(SynthesizeCorpus, ASmallerCorpusIsAPrefixOfALargerOne) {
  SynthesisOptions fewer = Small();
  fewer.traces = 5;
  const Corpus small = SynthesizeCorpus(fewer, 3), large = SynthesizeCorpus(Small(), 3);
  ASSERT_EQ(small.traces.size(), 5u);
  for (size_t i = 0; i < small.traces.size(); ++i) EXPECT_TRUE(small.traces[i] == large.traces[i]) << i;
}

TEST(SynthesizeCorpus, TracesObeyTheFormatsInvariants) {
  const Corpus corpus = SynthesizeCorpus(Small(), 11);
  size_t requests = 0, tails = 0;  // prompts that end inside a block, as in real files
  for (const Trace& t : corpus.traces) {
    requests += t.TotalRequestCount();
    EXPECT_EQ(t.block_size, 64);
    EXPECT_EQ(t.hash_id_scope, "local");
    ASSERT_GE(t.requests.size(), 2u);
    const auto check = [&](const std::vector<Request>& thread) {
      for (size_t i = 0; i < thread.size(); ++i) {
        const Request& r = thread[i];
        EXPECT_EQ(r.hash_ids.size(), static_cast<size_t>(r.input_tokens / 64));  // one id per full block
        tails += r.input_tokens % 64 != 0;
        EXPECT_EQ(r.ttft_s.has_value(), r.type == RequestType::kStreaming);
        if (i > 0) {
          EXPECT_GE(r.start_time_s + kTimeSlackS, thread[i - 1].end_time_s());
        }
      }
    };
    check(t.requests);
    for (const Subagent& s : t.subagents) {
      check(s.requests);
      ASSERT_LT(s.spawned_after_turn, t.requests.size());
      EXPECT_GE(s.spawn_time_s + kTimeSlackS, t.requests[s.spawned_after_turn].end_time_s());
      if (s.gates_turn) {  // the gated turn starts after the subagent finished
        EXPECT_EQ(*s.gates_turn, s.spawned_after_turn + 1);
        EXPECT_GE(t.requests[*s.gates_turn].start_time_s + kTimeSlackS, s.requests.back().end_time_s());
      } else {
        EXPECT_EQ(s.spawned_after_turn + 1, t.requests.size());
        EXPECT_EQ(s.status, SubagentStatus::kAsyncLaunched);
      }
    }
  }
  EXPECT_GT(tails, requests * 9 / 10);  // 63 in 64 on average
}

// The default corpus lands on the published statistics (agentx-format.md).
TEST(SynthesizeCorpus, DefaultCorpusMatchesThePublishedStatistics) {
  const Corpus corpus = SynthesizeCorpus(SynthesisOptions{}, 1);
  const TraceStats s = ComputeStats(corpus);
  EXPECT_EQ(s.traces, 393);
  EXPECT_GT(s.requests, 80'000);
  EXPECT_LT(s.requests, 120'000);
  EXPECT_GT(s.top_level_requests, 45'000);
  EXPECT_LT(s.top_level_requests, 65'000);
  EXPECT_GE(s.input_tokens.p50, 120'000);  // published ~142K
  EXPECT_LE(s.input_tokens.p50, 165'000);
  EXPECT_GE(s.new_tokens.p50, 1'400);  // published ~1.7K
  EXPECT_LE(s.new_tokens.p50, 2'100);
  EXPECT_GE(s.ceiling.ratio(), 0.95);  // published 96-97%
  EXPECT_LE(s.ceiling.ratio(), 0.98);
  EXPECT_GE(s.main_turns.p50, 55);  // published ~65
  EXPECT_LE(s.main_turns.p50, 75);
  EXPECT_GE(s.session_duration_s.p50, 1.5 * 3600);  // published ~2 h
  EXPECT_LE(s.session_duration_s.p50, 2.5 * 3600);
  EXPECT_GE(s.first_input_tokens.p50, 35'000);  // published ~40K
  EXPECT_LE(s.first_input_tokens.p50, 46'000);
  EXPECT_GE(s.last_input_tokens.p50, 150'000);  // published ~173K
  EXPECT_LE(s.last_input_tokens.p50, 195'000);
  EXPECT_GE(s.traces_over_max_context, 5);  // published 10 of 393
  EXPECT_LE(s.traces_over_max_context, 16);
  EXPECT_GE(s.max_fan_out, 2);
  EXPECT_LE(s.max_fan_out, 4);
  EXPECT_GT(s.background_subagents, 0);
  EXPECT_DOUBLE_EQ(s.think_time_s.max, 87 * 60);  // the planted long pause is the longest
}

}  // namespace
}  // namespace kvpool::trace
