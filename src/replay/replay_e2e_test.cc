// A tiny replay end to end: synthetic corpus, a few sessions, the in-process pool, no pacing.
#include <gtest/gtest.h>

#include "engine/kv_cache_memory.h"
#include "http/test_http_client.h"
#include "replay/replay_run.h"
#include "replay/test_tiny_replay.h"
#include "trace/mooncake_loader.h"
#include "trace/trace_loader.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sched.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

namespace kvpool::replay {
namespace {

using testing::SmallCorpus;
using testing::TinyRun;

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

// An SSD tier under a pool far smaller than the sessions' histories (issue 17): the pool
// demotes instead of dropping, restores read chunks from the tier's file, every byte verifies.
TEST(ReplayEndToEndTest, AnSsdTierUnderASmallPoolTakesWhatDramCannotHold) {
  ReplayRunOptions o = TinyRun(true);
  o.geometry.pool_tokens = 120'000;  // ~4 MB; three sessions of ~40K+ tokens each, and growing
  o.ssd_tokens = 8 * o.geometry.pool_tokens;
  auto s = RunReplay(SmallCorpus(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->verification_errors, 0u);
  EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
  ASSERT_TRUE(s->pool_counters.has_value());
  const PoolCounters& c = *s->pool_counters;
  EXPECT_GT(c.ssd_capacity_bytes, 0u);
  EXPECT_LE(c.used_bytes, c.capacity_bytes);
  EXPECT_GT(c.demotions, 0u);  // the DRAM pool stays full while the lanes save
  EXPECT_EQ(c.demotion_failures, 0u);
  EXPECT_EQ(c.promotion_failures, 0u);
  EXPECT_EQ(s->gpu_cache_tokens + s->pool_tokens + s->computed_tokens, s->prompt_tokens);
  EXPECT_GT(s->pool_ssd_tokens, 0u);
  EXPECT_LE(s->pool_ssd_tokens, s->pool_tokens);
  std::printf("%s pool tokens from SSD: %llu\n", FormatSummary(*s).c_str(),
              static_cast<unsigned long long>(s->pool_ssd_tokens));
}

// The router's retention hints (issue 18) reach the real pool: each waiting session's history
// is retained (predicted from the waits seen so far, or the oracle's recorded ones, which also
// releases each ended one), through the real client and master, and every restored byte still
// verifies. Only the predicted run scores its predictions.
TEST(ReplayEndToEndTest, SessionRetentionHintsReachThePool) {
  for (auto retention : {ReplayOptions::Retention::kPredicted, ReplayOptions::Retention::kOracle}) {
    ReplayRunOptions o = TinyRun(true);
    o.replay.retention = retention;
    auto s = RunReplay(SmallCorpus(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->verification_errors, 0u);
    EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
    EXPECT_GT(s->deployment.retention_keys, 0u);
    EXPECT_GT(s->restores, 0);
    EXPECT_EQ(s->return_predictions.has_value(), retention == ReplayOptions::Retention::kPredicted);
    if (s->return_predictions) {
      EXPECT_GT(s->return_predictions->scored, 0);
    }
  }
}

// The run's /metrics while it runs: the connectors' counters and latency histograms, read at
// its last progress report (the endpoint stops with the run).
TEST(ReplayEndToEndTest, TheRunServesItsConnectorMetrics) {
  ReplayRunOptions o = TinyRun(true);
  o.metrics_listen = "127.0.0.1:0";
  const std::string file = ::testing::TempDir() + "/replay-metrics.prom";
  std::remove(file.c_str());
  o.metrics_file = file;
  std::string metrics;
  o.on_progress = [&](const ReplayProgress& p) {
    ASSERT_GT(p.metrics_port, 0);
    metrics = http::testing::HttpGet(p.metrics_port, "/metrics");
  };
  auto s = RunReplay(SmallCorpus(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK", 0), 0u) << metrics;
  const auto lookups = s->deployment.connector.at("kvpool_connector_lookups");
  EXPECT_GT(lookups, 0u);
  for (const std::string& series :
       {"kvpool_connector_lookups_total " + std::to_string(lookups),
        "kvpool_connector_lookup_seconds_count " + std::to_string(lookups),
        std::string("kvpool_connector_restore_seconds_bucket{le=\"+Inf\"} "), std::string("kvpool_connector_save_bytes_total ")}) {
    EXPECT_NE(metrics.find(series), std::string::npos) << series << "\n" << metrics.substr(0, 2000);
  }
  // Beside the whole restore, each stage's own time; every handoff; every transfer request.
  using http::testing::SampleValue;
  const double restores = SampleValue(metrics, "kvpool_connector_restore_seconds_count");
  EXPECT_GT(restores, 0) << metrics;
  for (int stage = 0; stage < 4; ++stage) {
    const double stage_restores =
        SampleValue(metrics, fmt::format("kvpool_connector_restore_stage_seconds_count{{stage=\"{}\"}}", stage));
    EXPECT_GT(stage_restores, 0) << stage;
    EXPECT_LE(stage_restores, restores) << stage;
  }
  EXPECT_GE(SampleValue(metrics, "kvpool_handoff_seconds_count"), s->requests);
  EXPECT_GT(SampleValue(metrics, "kvpool_handoff_bytes_sum"), 0);
  // Restores on the same host map the segment rather than read it: reads may be none.
  EXPECT_GE(SampleValue(metrics, "kvpool_transfer_request_bytes_count{op=\"read\"}"), 0);
  EXPECT_GT(SampleValue(metrics, "kvpool_transfer_request_bytes_count{op=\"write\"}"), 0);
  // The file holds the run's last word, the same as the endpoint's last answer.
  std::ifstream in(file);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string& series : {std::string("kvpool_connector_lookups_total"), std::string("kvpool_handoff_seconds_count"),
                                    std::string("kvpool_transfer_request_bytes_sum{op=\"read\"}")}) {
    EXPECT_EQ(SampleValue("\n" + written, series), SampleValue(metrics, series)) << series;
  }
  std::remove(file.c_str());
}

TEST(ReplayEndToEndTest, AMetricsFileInAMissingFolderIsRefusedBeforeTheRun) {
  ReplayRunOptions o = TinyRun(true);
  o.metrics_file = "/nonexistent-kvpool-folder/run.prom";
  auto s = RunReplay(SmallCorpus(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("does not exist"), std::string::npos) << s.status().ToString();
}

// A run's JSON without what measures the machine that ran it (SummaryToJson's "machine_timings").
nlohmann::json EmulatedOnly(nlohmann::json j) {
  j.erase("machine_timings");
  return j;
}

// Spins on every core it is allowed until destroyed: a busy machine beside a run.
class CpuHog {
 public:
  CpuHog() {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
        }
      });
    }
  }
  ~CpuHog() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// A replay is an experiment: the same corpus and seed must give the same figures, every one of
// them, or no comparison between two runs (an arm against its baseline) means anything. The
// pool runs on the replay's clock, so this holds under eviction (a pool of a fifth of the
// working set over an SSD tier as large, retention hints on), the pool's own counters
// included, whatever the machine does meanwhile: the second run shares one core with two busy
// threads.
TEST(ReplayEndToEndTest, TheSameSeedGivesTheSameSummaryUnderEvictionOnABusyCore) {
  const trace::Corpus corpus = SmallCorpus();
  ReplayRunOptions o = TinyRun(true);
  o.replay.sessions = 6;
  o.replay.max_requests = 48;
  o.replay.retention = ReplayOptions::Retention::kPredicted;
  o.geometry.pool_tokens = 300'000;
  o.ssd_tokens = 300'000;
  auto first = RunReplay(corpus, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->pool_counters.has_value());
  EXPECT_GT(first->pool_counters->evicted_objects, 0u) << "the pool never evicted: the test shows nothing";
  EXPECT_GT(first->pool_counters->demotions, 0u);
  EXPECT_GT(first->pool_counters->ssd_hits, 0u);
  EXPECT_GT(first->deployment.retention_keys, 0u);
  EXPECT_EQ(first->verification_errors, 0u);

  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // threads started from here on inherit it
  Result<ReplaySummary> second = [&] {
    CpuHog hog;
    return RunReplay(corpus, o);
  }();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const nlohmann::json a = EmulatedOnly(SummaryToJson(*first)), b = EmulatedOnly(SummaryToJson(*second));
  EXPECT_EQ(a.dump(1), b.dump(1)) << "diff: " << nlohmann::json::diff(a, b).dump();

  ReplayRunOptions other_seed = o;
  other_seed.replay.seed += 1;
  auto third = RunReplay(corpus, other_seed);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(EmulatedOnly(SummaryToJson(*third)).dump(), a.dump()) << "the seed changes nothing";
}

// The four-server cluster, both pool arms: real pools (one shared of 4 parts; four of 4
// parts, one per server), every byte verified, the same seed giving the same results.
TEST(ReplayEndToEndTest, FourServersSharedAndSplitPools) {
  const trace::Corpus corpus = SmallCorpus();
  auto run = [&](const std::string& scope) {
    ReplayRunOptions o = TinyRun(true);
    o.topology = engine::Topology::FourServer6P2D();
    o.pool_scope = scope;
    o.replay.sessions = 6;
    o.replay.max_requests = 40;
    auto s = RunReplay(corpus, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  };
  const ReplaySummary shared = run("shared"), split = run("split");
  for (const ReplaySummary* s : {&shared, &split}) {
    SCOPED_TRACE(s->pool_scope);
    EXPECT_EQ(s->verification_errors, 0u);
    EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
    EXPECT_EQ(s->gpus, 32);
    EXPECT_EQ(s->servers, 4);
    EXPECT_EQ(s->topology, "4x8-6p2d");
    EXPECT_GT(s->deployment.rails.bytes, 0);  // every handoff crosses between servers
    EXPECT_GT(s->deployment.router_moves, 0u);
  }
  EXPECT_GT(shared.pool_share(), split.pool_share());
  // Each arm again, with the same seed: the same emulated results.
  for (const ReplaySummary* first : {&shared, &split}) {
    SCOPED_TRACE(first->pool_scope);
    const ReplaySummary again = run(first->pool_scope);
    EXPECT_EQ(again.prompt_tokens, first->prompt_tokens);
    EXPECT_EQ(again.pool_tokens, first->pool_tokens);
    EXPECT_DOUBLE_EQ(again.ttft_s.p90, first->ttft_s.p90);
  }
  std::printf("%s%s", FormatSummary(shared).c_str(), FormatSummary(split).c_str());

  ReplayRunOptions bad = TinyRun(true);
  bad.pool_scope = "split";
  bad.pool = client::PoolParts::Single("127.0.0.1:1");
  EXPECT_EQ(RunReplay(corpus, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReplayEndToEndTest, GpuOptionsAreCheckedBeforeAnythingStarts) {
  const trace::Corpus corpus = SmallCorpus();
  ReplayRunOptions gpu_handoff_on_host = TinyRun(true);
  gpu_handoff_on_host.handoff = "gpu";
  EXPECT_EQ(RunReplay(corpus, gpu_handoff_on_host).status().code(), StatusCode::kInvalidArgument);
  ReplayRunOptions too_many_gpus = TinyRun(true);
  too_many_gpus.gpus = engine::CudaDeviceCount() + 1;
  auto s = RunReplay(corpus, too_many_gpus);
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("--gpu"), std::string::npos) << s.status().ToString();
  if (engine::CudaDeviceCount() > 0) {
    ReplayRunOptions cpu_handoff_on_gpu = TinyRun(true);
    cpu_handoff_on_gpu.gpus = 1;
    cpu_handoff_on_gpu.handoff = "cpu";
    EXPECT_EQ(RunReplay(corpus, cpu_handoff_on_gpu).status().code(), StatusCode::kInvalidArgument);
  }
}

// The eight real AgentX sample files as published (a folder of trace_NNNN.json; partial tail
// blocks, missing timing fields, subagents), replayed with the AgentX semantics.
TEST(ReplayEndToEndTest, TheRealAgentXSampleFolderReplaysWithEveryByteVerified) {
  Result<trace::Corpus> corpus = trace::LoadTraces(std::string(KVPOOL_TRACE_TESTDATA) + "/weka-sample", std::nullopt);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  ReplayRunOptions o = TinyRun(true);
  o.geometry.prefill_cache_tokens = 250'000;  // every sample trace (peak 198K tokens) fits
  o.replay.sessions = 4;
  o.replay.max_requests = 60;
  auto s = RunReplay(*corpus, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  SCOPED_TRACE(FormatSummary(*s));
  EXPECT_EQ(s->traces_skipped, 0);
  EXPECT_EQ(s->verification_errors, 0u);
  EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
  EXPECT_GE(s->requests, 20);  // those finishing after 90% of the lanes warmed up
  EXPECT_EQ(s->gpu_cache_tokens + s->pool_tokens + s->computed_tokens, s->prompt_tokens);
  EXPECT_GT(s->pool_tokens, 0u);  // four lanes of up to 198K tokens outgrow a 250K-token GPU cache
  EXPECT_LE(s->reuse(), s->ceiling() + 1e-9);
  EXPECT_LT(s->ceiling(), 1.0);  // the tails of real prompts are never hits
}

// A Mooncake-format file (timestamped requests, global 512-token block ids): 10 prompt families
// of 40 blocks, each family coming back every 10 requests with 4 more blocks, 3 s apart.
trace::Corpus MooncakeCorpus(int requests) {
  std::ostringstream file;
  for (int i = 0; i < requests; ++i) {
    const int family = i % 10, blocks = 40 + 4 * (i / 10);
    file << "{\"timestamp\": " << 3000 * i << ", \"input_length\": " << 512 * blocks << ", \"output_length\": 8, "
         << "\"hash_ids\": [";
    for (int b = 0; b < blocks; ++b) file << (b ? ", " : "") << family * 1000 + b;
    file << "]}\n";
  }
  std::istringstream in(file.str());
  return trace::ParseMooncake(in, "mooncake.jsonl").value();
}

TEST(ReplayEndToEndTest, MooncakeTracesReplayOpenLoopByTimestamp) {
  const trace::Corpus corpus = MooncakeCorpus(60);
  for (double rate : {1.0, 2.0}) {
    ReplayRunOptions o = TinyRun(true);
    o.open_loop = true;
    o.replay.rate_scale = rate;
    o.replay.max_requests = 0;
    o.replay.duration_s = 0;  // until the trace ends
    o.replay.warmup_requests = 10;
    auto s = RunReplay(corpus, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    SCOPED_TRACE(FormatSummary(*s));
    EXPECT_EQ(s->sessions, 0);
    EXPECT_EQ(s->requests + s->uncounted_requests, 60);
    EXPECT_EQ(s->uncounted_requests, 10);
    EXPECT_EQ(s->verification_errors, 0u);
    EXPECT_EQ(s->failed_requests, 0);
    // Arrivals follow the timestamps whatever the deployment does: the window opens at the
    // 11th request's time and the trace's 177 s span shrinks with the rate.
    EXPECT_DOUBLE_EQ(s->window_start_s, 30.0 / rate);
    EXPECT_GE(s->window_s, 147.0 / rate);
    EXPECT_GT(s->pool_tokens, 0u);  // families evicted from the GPU cache come back from the pool
    EXPECT_LE(s->reuse(), s->ceiling() + 1e-9);
  }
  ReplayRunOptions agentx = TinyRun(true);
  agentx.open_loop = true;  // an AgentX corpus has many traces: not a timestamped request file
  EXPECT_EQ(RunReplay(SmallCorpus(), agentx).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::replay
