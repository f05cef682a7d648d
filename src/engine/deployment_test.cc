#include "engine/deployment.h"

#include <gtest/gtest.h>

#include <numeric>

#include "connector/test_pool.h"

namespace kvpool::engine {
namespace {

std::vector<connector::TokenId> Prompt(size_t n, connector::TokenId first = 1) {
  std::vector<connector::TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

ModelGeometry SmallGeometry() {
  ModelGeometry g = GeometryPreset("tiny").value();
  g.prefill_cache_tokens = 4096;  // holds one 3K prompt, not two
  g.decode_kv_tokens = 8192;
  g.pool_tokens = 64 * 1024;
  return g;
}

class DeploymentTest : public ::testing::Test {
 protected:
  std::unique_ptr<Deployment> Make(bool with_pool, double prefetch_share = 0, double admission_timeout_s = 900,
                                   bool oracle_gate = false) {
    if (with_pool) {
      pool_ = std::make_unique<connector::testing::InProcessPool>(5000, SmallGeometry().pool_bytes());
      store_ = std::make_unique<connector::PoolChunkStore>(&pool_->client());
    }
    DeploymentOptions o;
    o.geometry = SmallGeometry();
    if (with_pool) o.pools = {store_.get()};
    o.run_salt = "test";
    o.prefetch_share = prefetch_share;
    o.admission_timeout_s = admission_timeout_s;
    o.oracle_gate = oracle_gate;
    auto d = Deployment::Create(o, &sim_);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return std::move(d).value();
  }
  RequestRecord Serve(Deployment& d, uint64_t session, std::vector<connector::TokenId> tokens, uint64_t out = 4) {
    RequestRecord got;
    d.Submit(DeploymentRequest{session, std::move(tokens), out, true}, [&](const RequestRecord& r) { got = r; });
    sim_.Run();
    return got;
  }

  Simulation sim_;
  std::unique_ptr<connector::testing::InProcessPool> pool_;
  std::unique_ptr<connector::PoolChunkStore> store_;
};

// The replay's verification is not vacuous: with the checksum check off, a store that hands
// back bytes with one bit flipped in every chunk must show up as verification errors, not as a
// clean restore. (With it on, such bytes are never unpacked: the test below.)
TEST_F(DeploymentTest, CorruptBytesFromThePoolAreCaughtByTheVerification) {
  pool_ = std::make_unique<connector::testing::InProcessPool>(5000, SmallGeometry().pool_bytes());
  store_ = std::make_unique<connector::PoolChunkStore>(&pool_->client());
  connector::testing::InterposedChunkStore corrupting(store_.get());
  uint64_t flipped = 0;
  DeploymentOptions o;
  o.geometry = SmallGeometry();
  o.pools = {&corrupting};
  o.run_salt = "test";
  o.verify_checksums = false;
  auto d = Deployment::Create(o, &sim_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(Serve(**d, 1, Prompt(3000, 1)).verification_errors, 0u);
  Serve(**d, 2, Prompt(3000, 100'000));  // evicts session 1's blocks from the GPU cache
  corrupting.after_read = [&](std::span<const size_t>, std::span<const client::ValueBuffer> buffers,
                              std::vector<Result<uint64_t>>& out) {
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (!out[i].ok() || buffers[i].size() == 0) continue;
      buffers[i].data()[buffers[i].size() / 2] ^= std::byte{0x10};
      ++flipped;
    }
  };
  const RequestRecord back = Serve(**d, 1, Prompt(3200, 1));
  ASSERT_GT(flipped, 0u) << "the restore read nothing from the pool";
  EXPECT_GT(back.pool_tokens, 0u);
  EXPECT_GT(back.verification_errors, 0u) << "a flipped bit in every restored chunk went unnoticed";
}

// Bytes that went bad inside the store never reach a cache: every object's checksum fails, the
// restore falls back, and the request computes its prefix and serves correct KV.
TEST_F(DeploymentTest, BytesThatWentBadInTheStoreAreComputedInsteadOfRestored) {
  auto d = Make(true);
  EXPECT_EQ(Serve(*d, 1, Prompt(3000, 1)).verification_errors, 0u);
  Serve(*d, 2, Prompt(3000, 100'000));  // evicts session 1's blocks from the GPU cache
  pool_->CorruptStore();
  const RequestRecord back = Serve(*d, 1, Prompt(3200, 1));
  EXPECT_FALSE(back.failed) << back.failure;
  EXPECT_EQ(back.pool_tokens, 0u);
  EXPECT_EQ(back.computed_tokens, 3200u - back.gpu_cached_tokens);
  EXPECT_EQ(back.verification_errors, 0u);
  EXPECT_GT(d->counters().connector.at("kvpool_connector_restore_corrupt_objects"), 0u);
}

TEST_F(DeploymentTest, ASecondTurnReusesTheGpuCache) {
  auto d = Make(false);
  const RequestRecord first = Serve(*d, 1, Prompt(3000));
  EXPECT_FALSE(first.failed) << first.failure;
  EXPECT_EQ(first.computed_tokens, 3000u);
  EXPECT_EQ(first.verification_errors, 0u);
  EXPECT_GT(first.ttft_s(), 0);
  EXPECT_GT(first.finish_s, first.first_token_s);
  const RequestRecord second = Serve(*d, 1, Prompt(3100));
  EXPECT_EQ(second.gpu_cached_tokens, 3000u / 16 * 16);
  EXPECT_EQ(second.computed_tokens, 3100u - second.gpu_cached_tokens);
  EXPECT_EQ(second.verification_errors, 0u);
  EXPECT_LT(second.ttft_s(), first.ttft_s());
}

TEST_F(DeploymentTest, ThePoolServesWhatTheGpuCacheEvicted) {
  auto d = Make(true);
  EXPECT_EQ(Serve(*d, 1, Prompt(3000, 1)).computed_tokens, 3000u);
  Serve(*d, 2, Prompt(3000, 100'000));  // evicts session 1's blocks from the GPU cache
  const RequestRecord back = Serve(*d, 1, Prompt(3200, 1));
  EXPECT_FALSE(back.failed) << back.failure;
  EXPECT_EQ(back.pool_tokens + back.gpu_cached_tokens, 3000u / 256 * 256);
  EXPECT_GT(back.pool_tokens, 0u);
  EXPECT_EQ(back.verification_errors, 0u);
  EXPECT_EQ(back.stage_restore_s.size(), 4u);
  EXPECT_GT(back.restore_bytes, 0u);
  EXPECT_GT(d->counters().prefix_cache_evictions, 0u);
}

// Session 1 comes back while session 3's long answer fills the decode KV: it waits at the
// admission gate, and its history has left the GPU cache for the pool (session 3's prompt took
// the cache). Returns session 1's second record.
RequestRecord ReturnWhileDecodeIsFull(Simulation& sim, Deployment& d) {
  RequestRecord back;
  d.Submit(DeploymentRequest{1, Prompt(3000, 1), 4, true}, [](const RequestRecord&) {});
  sim.Run();
  d.Submit(DeploymentRequest{3, Prompt(4000, 200'000), 1000, true}, [](const RequestRecord&) {});
  d.Submit(DeploymentRequest{1, Prompt(3200, 1), 1000, true}, [&](const RequestRecord& r) { back = r; });
  sim.Run();
  return back;
}

TEST_F(DeploymentTest, WithoutPrefetchARestoreStartsWithTheRequestAndIsWaitedForWhole) {
  auto d = Make(true);
  const RequestRecord back = ReturnWhileDecodeIsFull(sim_, *d);
  ASSERT_FALSE(back.failed) << back.failure;
  ASSERT_GT(back.pool_tokens, 0u);
  EXPECT_FALSE(back.prefetched);
  EXPECT_EQ(back.restore_wait_s, *std::max_element(back.stage_restore_s.begin(), back.stage_restore_s.end()));
  EXPECT_GT(back.restore_wait_s, 0);
  EXPECT_EQ(d->counters().prefetches, 0u);
}

TEST_F(DeploymentTest, APrefetchRestoresWhileTheRequestWaitsAtTheGate) {
  auto d = Make(true, /*prefetch_share=*/0.9);
  const RequestRecord back = ReturnWhileDecodeIsFull(sim_, *d);
  ASSERT_FALSE(back.failed) << back.failure;
  EXPECT_TRUE(back.prefetched);
  EXPECT_EQ(back.pool_tokens + back.gpu_cached_tokens, 3000u / 256 * 256);
  EXPECT_GT(back.pool_tokens, 0u);
  EXPECT_EQ(back.stage_restore_s.size(), 4u);
  EXPECT_GT(back.admitted_s - back.arrival_s, *std::max_element(back.stage_restore_s.begin(), back.stage_restore_s.end()));
  EXPECT_EQ(back.restore_wait_s, 0) << "restored while it waited at the gate";
  EXPECT_EQ(back.verification_errors, 0u) << "the prefetched KV is the request's";
  EXPECT_EQ(d->counters().prefetches, 1u);
  EXPECT_EQ(d->counters().prefetches_dropped, 0u);
}

TEST_F(DeploymentTest, ARequestThatFailsAtTheGateGivesItsPrefetchBack) {
  auto d = Make(true, /*prefetch_share=*/0.9, /*admission_timeout_s=*/2);
  const RequestRecord back = ReturnWhileDecodeIsFull(sim_, *d);
  ASSERT_TRUE(back.failed);
  EXPECT_EQ(d->counters().prefetches, 1u);
  EXPECT_EQ(d->counters().prefetches_dropped, 1u);
  // The whole cache is free for the next request (one that fits it only with every block).
  const RequestRecord next = Serve(*d, 4, Prompt(4000, 500'000));
  EXPECT_FALSE(next.failed) << next.failure;
  EXPECT_EQ(next.verification_errors, 0u);
}

TEST_F(DeploymentTest, APrefetchShareBeyondNineTenthsIsRefused) {
  DeploymentOptions o;
  o.geometry = SmallGeometry();
  o.prefetch_share = 0.95;
  EXPECT_EQ(Deployment::Create(o, &sim_).status().code(), StatusCode::kInvalidArgument);
}

// Prefill compute time of one request: from ready (restore done) to the first token, less the handoff.
double PrefillComputeSeconds(const RequestRecord& r) { return r.first_token_s - r.prefill_ready_s - r.handoff_s; }

TEST_F(DeploymentTest, OneRequestsChunksGoThroughThePipelineOneAfterAnother) {
  DeploymentOptions o;
  o.geometry = SmallGeometry();
  o.geometry.prefill_cache_tokens = 64 * 1024;
  o.geometry.decode_kv_tokens = 128 * 1024;
  o.run_salt = "pipeline";
  auto d = Deployment::Create(o, &sim_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const uint64_t budget = o.geometry.max_batched_tokens;
  const RequestRecord alone = Serve(**d, 1, Prompt(3 * budget, 1));
  ASSERT_FALSE(alone.failed) << alone.failure;
  // Three chunks, each through the four stages in turn: nothing overlaps.
  const CostModel cost(o.cost, o.geometry);
  double serial = 0;
  for (uint64_t c = 0; c < 3; ++c) {
    const PrefillSlice chunk[] = {{c * budget, (c + 1) * budget}};
    for (uint32_t st = 0; st < 4; ++st) serial += cost.PrefillStageSeconds(st, chunk);
  }
  EXPECT_NEAR(PrefillComputeSeconds(alone), serial, 1e-9);

  // Two such requests at once fill two stages at a time: together they take far less than
  // twice as long as one.
  std::vector<RequestRecord> got(2);
  const double start = sim_.now();
  for (uint64_t s = 0; s < 2; ++s) {
    (*d)->Submit(DeploymentRequest{10 + s, Prompt(3 * budget, 1'000'000 * (s + 1)), 4, true},
                 [&got, s](const RequestRecord& r) { got[s] = r; });
  }
  sim_.Run();
  for (const RequestRecord& r : got) {
    ASSERT_FALSE(r.failed) << r.failure;
    EXPECT_EQ(r.computed_tokens, 3 * budget);
  }
  const double both = std::max(got[0].first_token_s, got[1].first_token_s) - start;
  EXPECT_LT(both, 1.5 * (alone.first_token_s - alone.arrival_s));
}

TEST_F(DeploymentTest, FullDecodeMakesRequestsWaitNotFail) {
  auto d = Make(false);
  std::vector<RequestRecord> done;
  // Each reserves ~5K of the 8K decode tokens: the second waits for the first to finish.
  d->Submit(DeploymentRequest{1, Prompt(4000, 1), 1000, true}, [&](const RequestRecord& r) { done.push_back(r); });
  d->Submit(DeploymentRequest{2, Prompt(4000, 50'000), 1000, true}, [&](const RequestRecord& r) { done.push_back(r); });
  sim_.Run();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_FALSE(done[1].failed) << done[1].failure;
  EXPECT_GE(done[1].admitted_s, done[0].finish_s);
  const DeploymentCounters c = d->counters(0, done[1].finish_s);
  // 5,000 tokens over DCP4: the fullest rank holds 1,250 = 79 blocks of 16, reserved on all 4.
  EXPECT_NEAR(c.peak_decode_kv_utilisation, 4 * 79 * 16 / 8192.0, 1e-9);
  EXPECT_GT(c.mean_decode_kv_utilisation, 0.5);  // one request's reservation nearly all the time
  EXPECT_LE(c.mean_decode_kv_utilisation, c.peak_decode_kv_utilisation);
}

// The gate reserves what a request's client asked for at most (max_tokens), not what it will
// generate, unless it is the oracle: two requests that generate 100 tokens each but may generate
// 3,000 take ~5K of the 8K decode tokens each, so the second waits for the first.
TEST_F(DeploymentTest, TheGateReservesMaxTokensUnlessItIsTheOracle) {
  for (const bool oracle : {false, true}) {
    SCOPED_TRACE(oracle ? "oracle gate" : "max_tokens gate");
    auto d = Make(false, 0, 900, oracle);
    std::vector<RequestRecord> done;
    for (uint64_t session : {1, 2}) {
      d->Submit(DeploymentRequest{session, Prompt(2000, session * 50'000), 100, true, 3000},
                [&](const RequestRecord& r) { done.push_back(r); });
    }
    sim_.Run();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_FALSE(done[0].failed || done[1].failed) << done[0].failure << done[1].failure;
    if (oracle) {
      EXPECT_LT(done[1].admitted_s, done[0].finish_s) << "2,100 tokens each fit twice";
    } else {
      EXPECT_GE(done[1].admitted_s, done[0].finish_s) << "5,000 tokens each fit once";
    }
  }
}

TEST_F(DeploymentTest, AMaxTokensBelowTheOutputIsRefused) {
  auto d = Make(false);
  RequestRecord got;
  d->Submit(DeploymentRequest{1, Prompt(100), 50, true, 10}, [&](const RequestRecord& r) { got = r; });
  sim_.Run();
  EXPECT_TRUE(got.failed);
  EXPECT_NE(got.failure.find("max_tokens 10"), std::string::npos) << got.failure;
}

// Supersession releases a prompt's chunks from the one holding the first changed token on,
// and nothing when only the unsaved tail changed.
TEST_F(DeploymentTest, SupersessionReleasesTheChunksPastTheFirstChange) {
  auto d = Make(true);
  const std::vector<connector::TokenId> prompt = Prompt(3000);  // 11 whole chunks of 256
  Serve(*d, 1, prompt);
  d->SupersedeSession(prompt, 11 * 256);  // a continuation: the tail only
  EXPECT_EQ(d->counters().superseded_chunks, 0u);
  d->SupersedeSession(prompt, 1000);  // chunk 3 on
  const DeploymentCounters c = d->counters();
  EXPECT_EQ(c.superseded_chunks, 8u);
  EXPECT_EQ(c.superseded_bytes, 8u * 256 * SmallGeometry().bytes_per_token());
  // Released, not removed: the first three chunks and the rest are still there to restore.
  Serve(*d, 2, Prompt(3000, 100'000));  // evicts session 1's blocks from the GPU cache
  const RequestRecord back = Serve(*d, 1, Prompt(3200));
  EXPECT_EQ(back.pool_tokens + back.gpu_cached_tokens, 11u * 256);
}

TEST_F(DeploymentTest, TooLargeForDecodeFailsAtOnce) {
  auto d = Make(false);
  const RequestRecord r = Serve(*d, 1, Prompt(8000), 1000);
  EXPECT_TRUE(r.failed);
}

// The four-server cluster, whose routers place every request by power of two choices: sooner
// or later a session's turn runs on another prefill instance of its group, on another
// server. One shared pool still holds its history there; split pools (one per server) do not.
class FourServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Deployment> Make(bool shared) {
    const int pools = shared ? 1 : 4;
    for (int k = 0; k < pools; ++k) {
      pools_.push_back(std::make_unique<connector::testing::InProcessPool>(5000, SmallGeometry().pool_bytes(), 2));
      stores_.push_back(std::make_unique<connector::PoolChunkStore>(&pools_.back()->client()));
    }
    DeploymentOptions o;
    o.geometry = SmallGeometry();
    o.topology = Topology::FourServer6P2D();
    for (auto& store : stores_) o.pools.push_back(store.get());
    o.run_salt = "four";
    auto d = Deployment::Create(o, &sim_);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return std::move(d).value();
  }
  RequestRecord Serve(Deployment& d, uint64_t session, std::vector<connector::TokenId> tokens) {
    RequestRecord got;
    d.Submit(DeploymentRequest{session, std::move(tokens), 4, true}, [&](const RequestRecord& r) { got = r; });
    sim_.Run();
    return got;
  }
  // Turns of one session, each 100 tokens longer, until one lands on another prefill instance
  // than the first: returns the first and that one, and adds every prompt's length to *tokens.
  std::pair<RequestRecord, RequestRecord> ServeUntilItMoves(Deployment& d, double* tokens) {
    const RequestRecord first = Serve(d, 1, Prompt(3000));
    *tokens += 3000;
    for (size_t n = 3100; n < 4000; n += 100) {
      const RequestRecord next = Serve(d, 1, Prompt(n));
      *tokens += static_cast<double>(n);
      if (next.prefill_instance != first.prefill_instance) return {first, next};
      EXPECT_GT(next.gpu_cached_tokens, 0u);  // its own instance again: the GPU cache has it
    }
    ADD_FAILURE() << "every turn went to the same prefill instance";
    return {first, first};
  }

  Simulation sim_;
  std::vector<std::unique_ptr<connector::testing::InProcessPool>> pools_;
  std::vector<std::unique_ptr<connector::PoolChunkStore>> stores_;
};

TEST_F(FourServerTest, ASharedPoolFollowsASessionToAnotherServer) {
  auto d = Make(/*shared=*/true);
  double tokens = 0;
  const auto [first, moved] = ServeUntilItMoves(*d, &tokens);
  ASSERT_FALSE(moved.failed) << moved.failure;
  EXPECT_NE(moved.prefill_instance, first.prefill_instance);
  EXPECT_EQ(moved.decode_instance, first.decode_instance);  // the session keeps its group
  EXPECT_EQ(moved.gpu_cached_tokens, 0u);
  EXPECT_GE(moved.pool_tokens, 3000u / 256 * 256);
  EXPECT_EQ(moved.verification_errors + first.verification_errors, 0u);
  const DeploymentCounters c = d->counters();
  EXPECT_EQ(c.router_moves, 1u);
  // Handoffs (prefill never shares a server with its group's decode) and the pool's reads and
  // writes on other servers crossed the rails.
  EXPECT_GT(c.rails.bytes, tokens * 48'672);
}

TEST_F(FourServerTest, SplitPoolsDoNotFollowASessionToAnotherServer) {
  auto d = Make(/*shared=*/false);
  double tokens = 0;
  const auto [first, moved] = ServeUntilItMoves(*d, &tokens);
  ASSERT_FALSE(moved.failed) << moved.failure;
  EXPECT_NE(moved.prefill_instance, first.prefill_instance);
  EXPECT_EQ(moved.pool_tokens, 0u);  // a server it never ran on
  EXPECT_EQ(moved.computed_tokens, moved.input_tokens);
  // Only the handoffs crossed: each server's pool traffic stayed on it.
  EXPECT_DOUBLE_EQ(d->counters().rails.bytes, tokens * 48'672);
}

TEST_F(FourServerTest, PoolsMustBeOneOrOnePerServer) {
  DeploymentOptions o;
  o.geometry = SmallGeometry();
  o.topology = Topology::FourServer6P2D();
  connector::testing::InProcessPool pool(5000, SmallGeometry().pool_bytes());
  connector::PoolChunkStore store(&pool.client());
  o.pools = {&store, &store};
  const auto d = Deployment::Create(o, &sim_);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("one per server"), std::string::npos);
}

}  // namespace
}  // namespace kvpool::engine
