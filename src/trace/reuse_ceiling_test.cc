#include "trace/reuse_ceiling.h"

#include <gtest/gtest.h>

#include <sstream>

#include "trace/agentx_loader.h"
#include "trace/agentx_test_lines.h"

namespace kvpool::trace {
namespace {

using testing::RequestJson;
using testing::SubagentJson;
using testing::TraceJson;

Request WithIds(std::vector<uint64_t> ids, double t = 0) {
  Request r;
  r.start_time_s = t;
  r.hash_ids = BlockIds(std::move(ids));
  r.input_tokens = static_cast<int64_t>(r.hash_ids.size()) * 64;
  return r;
}

Trace ParseOne(const std::string& line) {
  int64_t dropped = 0;
  Result<Trace> t = ParseAgentXTrace(line, "test", &dropped);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? t.value() : Trace{};
}

TEST(PrefixHitWalk, HitsAreTheLeadingRunOfSeenIds) {
  PrefixHitWalk walk;
  EXPECT_EQ(walk.Visit(BlockIds({1, 2, 3})), 0);
  EXPECT_EQ(walk.Visit(BlockIds({1, 2, 3, 4})), 3);
  EXPECT_EQ(walk.Visit(BlockIds({1, 9, 3, 4})), 1);  // 3 and 4 are seen, but after a miss
  EXPECT_EQ(walk.Visit(BlockIds({9, 1})), 2);        // 9 became seen by the previous visit
  EXPECT_EQ(walk.Visit(BlockIds()), 0);
  EXPECT_EQ(walk.totals().hit_blocks, 6);
  EXPECT_EQ(walk.totals().total_blocks, 13);
}

TEST(PrefixHitWalk, SharedStorageGivesTheSameAnswerAsSeparateCopies) {
  BlockIdsBuilder builder;
  builder.Append(std::vector<uint64_t>{1, 2});
  const BlockIds a = builder.Snapshot();
  builder.Append(std::vector<uint64_t>{3, 4});
  const BlockIds b = builder.Snapshot();
  PrefixHitWalk shared, copied;
  for (const BlockIds& ids : {b, a, b}) {  // the longer prompt first, then a prefix of it
    EXPECT_EQ(shared.Visit(ids), copied.Visit(BlockIds(std::vector<uint64_t>(ids.begin(), ids.end()))));
  }
  EXPECT_EQ(shared.totals().hit_blocks, 6);
  EXPECT_EQ(shared.totals().hit_blocks, copied.totals().hit_blocks);
}

TEST(TraceReuseCeiling, WalksMainAndSubagentRequestsInTimeOrder) {
  // Main: [1] then [1,2,3]. Subagent (between them in the file, but its second request is
  // later in time than main's second) reuses main's block 1 then its own.
  const Trace t = ParseOne(TraceJson(
      "t", {RequestJson(0, {1}), SubagentJson(1, "a", {RequestJson(1, {1, 5}), RequestJson(9, {1, 5, 2, 3})}),
            RequestJson(5, {1, 2, 3})}));
  // Time order: [1] 0 hits; [1,5] 1 hit; [1,2,3] 1 hit (2 unseen); [1,5,2,3] 4 hits.
  const ReuseCeiling c = TraceReuseCeiling(t);
  EXPECT_EQ(c.hit_blocks, 0 + 1 + 1 + 4);
  EXPECT_EQ(c.total_blocks, 1 + 2 + 3 + 4);
  EXPECT_DOUBLE_EQ(c.ratio(), 0.6);
}

TEST(CorpusReuseCeiling, AgentXIdsAreLocalToATrace) {
  Corpus corpus;
  corpus.format = TraceFormat::kAgentX;
  corpus.traces.resize(2);
  corpus.traces[0].requests = {WithIds({1, 2}), WithIds({1, 2, 3}, 1)};
  corpus.traces[1].requests = {WithIds({1, 2, 3}), WithIds({1, 2, 3, 4}, 1)};  // same ids, other trace: no hits
  const ReuseCeiling c = CorpusReuseCeiling(corpus);
  EXPECT_EQ(c.hit_blocks, 2 + 3);
  EXPECT_EQ(c.total_blocks, 5 + 7);
}

TEST(CorpusReuseCeiling, MooncakeIdsAreGlobalOverTheFile) {
  Corpus corpus;
  corpus.format = TraceFormat::kMooncake;
  corpus.traces.resize(1);
  corpus.traces[0].requests = {WithIds({1, 2}), WithIds({7}), WithIds({1, 2, 3}), WithIds({7, 8}), WithIds({4})};
  const ReuseCeiling c = CorpusReuseCeiling(corpus);
  EXPECT_EQ(c.hit_blocks, 0 + 0 + 2 + 1 + 0);
  EXPECT_EQ(c.total_blocks, 2 + 1 + 3 + 2 + 1);
  EXPECT_EQ(GlobalReuseCeiling(corpus.traces[0].requests).hit_blocks, c.hit_blocks);
}

TEST(ReuseCeiling, EmptyIsZeroNotNaN) { EXPECT_EQ(ReuseCeiling{}.ratio(), 0.0); }

}  // namespace
}  // namespace kvpool::trace
