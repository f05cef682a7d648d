// The capacity planner: its LRU, and its predictions against real replays of a tiny deployment.
#include "replay/pool_plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "replay/chunk_lru.h"
#include "replay/replay_run.h"
#include "replay/test_tiny_replay.h"

namespace kvpool::replay {
namespace {

std::vector<connector::ChunkKey> Keys(uint64_t first, size_t n) {
  std::vector<connector::ChunkKey> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back({0, first + i});
  return keys;
}

TEST(ChunkLruTest, EvictsTheLeastRecentDownToTheLowWatermarkOnceAboveTheHigh) {
  ChunkLru lru(/*high=*/6, /*low=*/4, ChunkLru::Order::kHeadLeastRecent);
  const auto a = Keys(0, 3), b = Keys(100, 3), c = Keys(200, 1);
  lru.Insert(a, 0);
  lru.Insert(b, 0);
  EXPECT_EQ(lru.size(), 6u);  // at the high watermark, not above it: nothing goes
  lru.Touch(a, 0, 2);         // a[0], a[1] most recent; a[2], then b, least
  lru.Insert(a, 0);           // held already: skipped, not made more recent
  lru.Insert(c, 0);           // 7 > 6: down to 4, least recent first
  EXPECT_EQ(lru.size(), 4u);
  EXPECT_EQ(lru.evicted(), 3u);
  EXPECT_EQ(lru.LeadingRun(a, 0), 2u);  // a[2] went
  EXPECT_EQ(lru.LeadingRun(b, 0), 0u);  // b[0] and b[1] went
  EXPECT_EQ(lru.LeadingRun(b, 2), 1u);
  EXPECT_EQ(lru.LeadingRun(c, 0), 1u);
}

TEST(ChunkLruTest, ReleasedChunksAreTheFirstToGo) {
  ChunkLru lru(/*high=*/4, /*low=*/3, ChunkLru::Order::kHeadLeastRecent);
  const auto a = Keys(0, 2), b = Keys(100, 2), c = Keys(200, 1);
  lru.Insert(a, 0);
  lru.Insert(b, 0);  // a is the least recent
  lru.Release(b, 1);  // b[1] goes first, though more recent than a
  lru.Release(Keys(300, 1), 0);  // not held: nothing
  lru.Insert(c, 0);   // 5 > 4: down to 3
  EXPECT_EQ(lru.evicted(), 2u);
  EXPECT_EQ(lru.LeadingRun(b, 0), 1u);  // b[1] went
  EXPECT_EQ(lru.LeadingRun(a, 0), 0u);  // then a[0], the least recent of the rest
  EXPECT_EQ(lru.LeadingRun(a, 1), 1u);
}

// The tiny replay, measured over 400 emulated seconds rather than its first 24 requests (a
// window of time is what the planner predicts for).
ReplayRunOptions TinyWindowRun() {
  ReplayRunOptions run = testing::TinyRun(true);
  run.replay.max_requests = 0;
  run.replay.duration_s = 400;
  run.replay.sessions = 6;
  return run;
}

PlanOptions TinyPlan() {
  const ReplayRunOptions run = TinyWindowRun();
  PlanOptions o;
  o.geometry = run.geometry;
  o.topology = run.topology;
  o.cost = run.cost;
  o.replay = run.replay;
  return o;
}

TEST(PoolPlanTest, MorePoolNeverReusesLessAndNoPoolServesNothingFromIt) {
  const trace::Corpus corpus = testing::SmallCorpus();
  auto points = PlanPool(corpus, TinyPlan(), {0, 200'000, 400'000, 5'000'000});
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  ASSERT_EQ(points->size(), 4u);
  EXPECT_EQ((*points)[0].summary.pool_tokens, 0u);
  for (size_t i = 1; i < points->size(); ++i) {
    EXPECT_GE((*points)[i].summary.reuse(), (*points)[i - 1].summary.reuse() - 1e-9) << i;
  }
  const ReplaySummary& largest = points->back().summary;
  EXPECT_EQ(points->back().pool_evicted_chunks, 0u);
  EXPECT_GT(largest.pool_share(), 0);
  EXPECT_LE(largest.reuse(), largest.ceiling() + 1e-9);
  EXPECT_GT((*points)[1].pool_evicted_chunks, 0u);  // a small pool does evict
}

// The planner runs the replay's own lanes against a model of its caches: on a deployment that
// keeps up (the tiny one, 6 sessions), it predicts the replay's reuse with a pool that evicts and
// with the default one. (Sizes are whole 2 MiB segments of the tiny geometry's 32-byte tokens,
// as the embedded pool rounds up to them. Much smaller, the sessions' cycle outgrows the pool
// and LRU falls off a cliff, where a few chunks' difference decides a run.)
TEST(PlanAgainstReplayTest, PredictsWhatTheReplayReuses) {
  const trace::Corpus corpus = testing::SmallCorpus();
  const std::vector<uint64_t> sizes = {786'432, 1'500'000};
  auto points = PlanPool(corpus, TinyPlan(), sizes);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  for (size_t i = 0; i < sizes.size(); ++i) {
    ReplayRunOptions run = TinyWindowRun();
    run.geometry.pool_tokens = sizes[i];
    auto replayed = RunReplay(corpus, run);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    const double planned = (*points)[i].summary.reuse(), measured = replayed->reuse();
    EXPECT_NEAR(planned, measured, 0.03) << sizes[i] << " tokens";
    if (i == 0) {
      EXPECT_GT((*points)[i].pool_evicted_chunks, 0u);
    }
    std::printf("pool %llu tokens: planned %.1f%%, replayed %.1f%%\n", static_cast<unsigned long long>(sizes[i]),
                100 * planned, 100 * measured);
  }
}

}  // namespace
}  // namespace kvpool::replay
