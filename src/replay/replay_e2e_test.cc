// A tiny replay end to end: synthetic corpus, a few sessions, the in-process pool, no pacing.
#include <gtest/gtest.h>

#include "replay/replay_run.h"
#include "trace/corpus_synthesizer.h"

namespace kvpool::replay {
namespace {

ReplayRunOptions TinyRun(bool use_pool) {
  ReplayRunOptions o;
  o.geometry = GeometryPreset("tiny").value();
  o.replay.sessions = 3;
  o.replay.max_requests = 24;
  o.replay.duration_s = 0;
  o.replay.seed = 5;
  o.use_pool = use_pool;
  return o;
}

trace::Corpus SmallCorpus() {
  trace::SynthesisOptions s;
  s.traces = 12;
  s.turn_scale = 0.3;
  return trace::SynthesizeCorpus(s, 3);
}

TEST(ReplayEndToEndTest, PoolServesTokensAndEveryByteVerifies) {
  const trace::Corpus corpus = SmallCorpus();
  auto with_pool = RunReplay(corpus, TinyRun(true));
  ASSERT_TRUE(with_pool.ok()) << with_pool.status().ToString();
  auto without = RunReplay(corpus, TinyRun(false));
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  for (const ReplaySummary* s : {&*with_pool, &*without}) {
    SCOPED_TRACE(s->mode);
    EXPECT_EQ(s->verification_errors, 0u);
    EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
    EXPECT_GE(s->requests, 12);  // those finishing after every lane warmed up
    EXPECT_GT(s->throughput_tok_s_per_gpu, 0);
    EXPECT_GT(s->ttft_s.p50, 0);
    EXPECT_EQ(s->gpu_cache_tokens + s->pool_tokens + s->computed_tokens, s->prompt_tokens);
    EXPECT_LE(s->reuse(), s->ceiling() + 1e-9);
    EXPECT_GT(s->uncounted_requests, 0);  // primers and warm-ups
  }
  EXPECT_GT(with_pool->pool_share(), 0);
  EXPECT_GT(with_pool->restores, 0);
  EXPECT_GT(with_pool->save_bytes, 0u);
  EXPECT_EQ(without->pool_tokens, 0u);
  EXPECT_LT(with_pool->computed_share(), without->computed_share());
  std::printf("%s%s", FormatSummary(*with_pool).c_str(), FormatSummary(*without).c_str());
}

}  // namespace
}  // namespace kvpool::replay
