#include "trace/mooncake_loader.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/reuse_ceiling.h"
#include "trace/trace_loader.h"

namespace kvpool::trace {
namespace {

const std::string kRealTrace = std::string(KVPOOL_TRACE_TESTDATA) + "/mooncake-fast25-synthetic.jsonl";

TEST(MooncakeLoader, ReadsRequestsAsOneGlobalTrace) {
  std::istringstream in(
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 1500, \"input_length\": 1100, \"output_length\": 9, \"hash_ids\": [0, 1, 2]}\n");
  Result<Corpus> corpus = ParseMooncake(in, "m.jsonl");
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->format, TraceFormat::kMooncake);
  ASSERT_EQ(corpus->traces.size(), 1u);
  const Trace& t = corpus->traces[0];
  EXPECT_EQ(t.block_size, 512);
  EXPECT_EQ(t.hash_id_scope, "global");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[1].start_time_s, 1.5);
  EXPECT_EQ(t.requests[1].input_tokens, 1100);
  EXPECT_EQ(t.requests[1].output_tokens, 9);
  EXPECT_EQ(t.requests[1].hash_ids, BlockIds({0, 1, 2}));  // last block partial: ceil(1100 / 512)
}

TEST(MooncakeLoader, SkipsRequestsOverTheMaxContext) {
  std::istringstream in(
      "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
      "{\"timestamp\": 1, \"input_length\": 100, \"output_length\": 9, \"hash_ids\": [5]}\n");
  LoadOptions options;
  options.max_context_tokens = 1000;
  Result<Corpus> corpus = ParseMooncake(in, "m.jsonl", options);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->skipped_over_max_context, 1);
  ASSERT_EQ(corpus->traces[0].requests.size(), 1u);
  EXPECT_EQ(corpus->traces[0].requests[0].input_tokens, 100);
}

TEST(MooncakeLoader, LoadsTheRealFast25SyntheticTrace) {
  Result<Corpus> corpus = LoadTraces(kRealTrace, std::nullopt);  // format detected
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->format, TraceFormat::kMooncake);
  ASSERT_EQ(corpus->traces.size(), 1u);
  EXPECT_EQ(corpus->traces[0].requests.size(), 3993u);
  const ReuseCeiling ceiling = CorpusReuseCeiling(*corpus);
  EXPECT_GT(ceiling.ratio(), 0.0);
  EXPECT_LT(ceiling.ratio(), 1.0);
  // Pinned so a change in the walk shows up; 77,953 / 121,877 = 63.96% (an independent
  // Python walk over the same file gives the same counts).
  EXPECT_EQ(ceiling.hit_blocks, 77953);
  EXPECT_EQ(ceiling.total_blocks, 121877);
}

}  // namespace
}  // namespace kvpool::trace
