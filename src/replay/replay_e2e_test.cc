// A tiny replay end to end: synthetic corpus, a few sessions, the in-process pool, no pacing.
#include <gtest/gtest.h>

#include "replay/kv_cache_memory.h"
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

TEST(ReplayEndToEndTest, GpuOptionsAreCheckedBeforeAnythingStarts) {
  const trace::Corpus corpus = SmallCorpus();
  ReplayRunOptions gpu_handoff_on_host = TinyRun(true);
  gpu_handoff_on_host.handoff = "gpu";
  EXPECT_EQ(RunReplay(corpus, gpu_handoff_on_host).status().code(), StatusCode::kInvalidArgument);
  ReplayRunOptions too_many_gpus = TinyRun(true);
  too_many_gpus.gpus = ReplayCudaDeviceCount() + 1;
  auto s = RunReplay(corpus, too_many_gpus);
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("--gpu"), std::string::npos) << s.status().ToString();
  if (ReplayCudaDeviceCount() > 0) {
    ReplayRunOptions cpu_handoff_on_gpu = TinyRun(true);
    cpu_handoff_on_gpu.gpus = 1;
    cpu_handoff_on_gpu.handoff = "cpu";
    EXPECT_EQ(RunReplay(corpus, cpu_handoff_on_gpu).status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kvpool::replay
