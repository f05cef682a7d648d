// The handoff between processes or hosts into decode caches in GPU memory: HandoffSender
// (prefill caches in host memory, or in GPU memory where the kernel gathers each piece into
// page-locked host memory; one thread per PP rank) -> transfer engine (shm and tcp) ->
// HandoffReceiver, whose targets name a CUDA device, so every landed piece is copied to that GPU
// and scattered there by the kernel. Each decode cache is copied back after Wait and must equal,
// byte for byte, what the layout definition says (test_handoff_caches.h: every token-layer of
// the range at its owner's (block, slot), every other byte still its sentinel) — the same
// reference the CPU path (ScatterCpu) is held to. DCP rank d's cache lives on GPU d % GPUs.
// Skips when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "handoff/handoff_copy_cuda.h"
#include "handoff/handoff_receiver.h"
#include "handoff/handoff_sender.h"
#include "handoff/test_handoff_caches.h"
#include "device_cache.h"

namespace kvpool::handoff {
namespace {

using namespace std::chrono_literals;
using testing::HostScenario;
using WallClock = std::chrono::steady_clock;

using testing::DeviceCache;
using testing::ExpectSame;
using testing::Upload;

// A scenario whose decode caches are copied to GPUs (rank d on GPU d % gpus), and optionally its
// prefill caches (rank p on GPU p % gpus).
struct GpuScenario {
  HostScenario s;
  std::vector<std::unique_ptr<DeviceCache>> decode, prefill;

  std::vector<DecodeTarget> Targets() const {
    std::vector<DecodeTarget> targets;
    for (size_t d = 0; d < decode.size(); ++d) {
      targets.push_back({&decode[d]->cache, s.decode_tables[d], decode[d]->device});
    }
    return targets;
  }
};

void ToGpus(HostScenario s, int gpus, GpuScenario& out, bool prefill_too = false) {
  out.s = std::move(s);
  for (size_t d = 0; d < out.s.decode.size(); ++d) {
    out.decode.push_back(std::make_unique<DeviceCache>());
    Upload(out.s.decode[d], static_cast<int>(d % gpus), *out.decode.back());
  }
  for (size_t p = 0; prefill_too && p < out.s.prefill.size(); ++p) {
    out.prefill.push_back(std::make_unique<DeviceCache>());
    Upload(out.s.prefill[p], static_cast<int>(p % gpus), *out.prefill.back());
  }
}

// Every prefill rank sends its part from its own thread, as PP GPUs would: from its GPU twin
// when `prefill` has one for it, else from host memory.
std::vector<Status> SendAllRanks(const std::string& address, const HostScenario& s, uint64_t request_id,
                                 const std::vector<std::unique_ptr<DeviceCache>>& prefill = {}) {
  const uint32_t ranks = s.c.prefill.num_ranks();
  std::vector<Status> results(ranks);
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < ranks; ++p) {
    threads.emplace_back([&, p] {
      auto sender = HandoffSender::Connect(address, s.c.prefill, s.c.decode, p);
      if (!sender.ok()) {
        results[p] = sender.status();
        return;
      }
      const bool on_gpu = p < prefill.size();
      results[p] = (*sender)->Send(request_id, s.c.first_token, s.c.end_token,
                                   on_gpu ? prefill[p]->cache : s.prefill[p].cache(), s.prefill_tables[p],
                                   WallClock::now() + 30s, on_gpu ? prefill[p]->device : -1);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

testing::RandomCase Latent(uint32_t dcp_ranks, uint32_t interleave) {  // MLA-shaped: 576 B latent rows
  testing::RandomCase c;
  c.prefill.kind = c.decode.kind = KvLayoutKind::kLatent;
  c.prefill.bytes_per_token_per_layer = c.decode.bytes_per_token_per_layer = 576;
  c.prefill.stage_layers = {3, 3, 2};
  c.prefill.block_tokens = 16;
  c.decode.num_layers = 8;
  c.decode.block_tokens = 64;
  c.decode.dcp_ranks = dcp_ranks;
  c.decode.interleave = interleave;
  c.first_token = 100;
  c.end_token = 2100;
  return c;
}

testing::RandomCase SplitKv(uint32_t dcp_ranks, uint32_t interleave) {  // K/V planes, strided blocks
  testing::RandomCase c;
  c.prefill.kind = c.decode.kind = KvLayoutKind::kSplitKv;
  c.prefill.bytes_per_token_per_layer = c.decode.bytes_per_token_per_layer = 256;
  c.prefill.stage_layers = {2, 2};
  c.prefill.block_tokens = 7;
  c.decode.num_layers = 4;
  c.decode.block_tokens = 16;
  c.decode.dcp_ranks = dcp_ranks;
  c.decode.interleave = interleave;
  c.first_token = 0;
  c.end_token = 1500;
  c.extra_stride = 32;
  return c;
}

class HandoffNetworkGpuTest : public ::testing::TestWithParam<bool> {  // param: tcp only
 protected:
  void SetUp() override {
    gpus_ = HandoffCudaDeviceCount();
    if (gpus_ == 0) GTEST_SKIP() << "no CUDA device";
  }
  HandoffReceiverOptions Options() const {
    HandoffReceiverOptions o;
    if (GetParam()) o.shm_socket_dir = "";
    // Small slots: many pieces per pair, landing and bounce slots reused many times.
    o.max_write_bytes = 64 << 10;
    o.landing_bytes = 4 * o.max_write_bytes;
    return o;
  }
  // One request of `c` into GPU caches, checked byte for byte; from GPU prefill caches when
  // `gpu_prefill`.
  void HandOff(const testing::RandomCase& c, uint64_t seed, const std::string& what, bool gpu_prefill = false) {
    std::mt19937_64 rng(seed);
    GpuScenario g;
    ToGpus(testing::MakeHostScenario(c, rng), gpus_, g, gpu_prefill);
    ASSERT_FALSE(HasFatalFailure());
    const auto want = testing::ExpectedDecodePlanes(g.s);
    auto receiver = HandoffReceiver::Start(c.prefill, c.decode, Options());
    ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
    const Status expected = (*receiver)->Expect(1, c.first_token, c.end_token, g.Targets());
    ASSERT_TRUE(expected.ok()) << what << ": " << expected.ToString();
    for (const Status& st : SendAllRanks((*receiver)->address(), g.s, 1, g.prefill)) {
      ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
    }
    const Status ready = (*receiver)->Wait(1, WallClock::now() + 30s);
    ASSERT_TRUE(ready.ok()) << what << ": " << ready.ToString();
    for (size_t d = 0; d < g.decode.size(); ++d) {
      ExpectSame(want[d], *g.decode[d], what + " decode rank " + std::to_string(d));
    }
    EXPECT_GE((*receiver)->stats().pieces, uint64_t{c.prefill.num_ranks()} * c.decode.dcp_ranks);
  }
  int gpus_ = 0;
};

TEST_P(HandoffNetworkGpuTest, MlaLatentLandsInGpuCaches) {
  HandOff(Latent(1, 1), 1, "latent TP1");
  HandOff(Latent(4, 16), 2, "latent DCP4 I16");
  HandOff(Latent(2, 1), 3, "latent DCP2 I1");
}

TEST_P(HandoffNetworkGpuTest, KvSplitLandsInGpuCaches) {
  HandOff(SplitKv(1, 1), 4, "K/V TP1");
  HandOff(SplitKv(2, 3), 5, "K/V DCP2 I3");
}

TEST_P(HandoffNetworkGpuTest, RandomLayoutsLandInGpuCaches) {
  // Odd row sizes and strides: every load width of the kernel, unaligned pieces.
  std::mt19937_64 rng(17);
  for (int round = 0; round < 6; ++round) {
    const testing::RandomCase c = testing::MakeRandomCase(rng);
    HandOff(c, rng(), "round " + std::to_string(round));
  }
}

// Prefill caches in GPU memory: each piece is gathered by the kernel on the rank's GPU, copied to
// page-locked host memory and sent from there.
TEST_P(HandoffNetworkGpuTest, GpuPrefillCachesAreGatheredOnTheirGpus) {
  HandOff(Latent(4, 16), 31, "latent DCP4 I16, GPU prefill", true);
  HandOff(SplitKv(2, 3), 32, "K/V DCP2 I3, GPU prefill", true);
  std::mt19937_64 rng(33);
  for (int round = 0; round < 3; ++round) {
    HandOff(testing::MakeRandomCase(rng), rng(), "GPU prefill, round " + std::to_string(round), true);
  }
}

// Several requests in flight on one receiver at once, sharing its landing and bounce slots; one
// of them into host caches (the CPU scatter) beside the GPU ones.
TEST_P(HandoffNetworkGpuTest, ConcurrentRequestsIntoGpuAndHostCaches) {
  const testing::RandomCase base = Latent(4, 16);
  auto receiver = HandoffReceiver::Start(base.prefill, base.decode, Options());
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  constexpr int kRequests = 4;
  std::vector<GpuScenario> gpu(kRequests);
  std::vector<std::vector<std::vector<std::vector<std::byte>>>> want(kRequests);
  std::mt19937_64 rng(23);
  for (int i = 0; i < kRequests; ++i) {
    testing::RandomCase c = base;
    c.first_token = 300 * i;
    c.end_token = c.first_token + 700 + 211 * i;
    ToGpus(testing::MakeHostScenario(c, rng), gpus_, gpu[i]);
    ASSERT_FALSE(HasFatalFailure());
    want[i] = testing::ExpectedDecodePlanes(gpu[i].s);
    std::vector<DecodeTarget> targets = gpu[i].Targets();
    if (i == kRequests - 1) {  // the host twin of each cache instead
      for (size_t d = 0; d < targets.size(); ++d) targets[d] = {&gpu[i].s.decode[d].cache(), gpu[i].s.decode_tables[d]};
    }
    const Status st = (*receiver)->Expect(100 + i, c.first_token, c.end_token, targets);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::vector<std::vector<Status>> sent(kRequests);
  std::vector<std::thread> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.emplace_back([&, i] { sent[i] = SendAllRanks((*receiver)->address(), gpu[i].s, 100 + i); });
  }
  for (auto& t : requests) t.join();
  for (int i = 0; i < kRequests; ++i) {
    for (const Status& st : sent[i]) ASSERT_TRUE(st.ok()) << "request " << i << ": " << st.ToString();
    const Status ready = (*receiver)->Wait(100 + i, WallClock::now() + 30s);
    ASSERT_TRUE(ready.ok()) << "request " << i << ": " << ready.ToString();
    for (size_t d = 0; d < gpu[i].decode.size(); ++d) {
      const std::string what = "request " + std::to_string(i) + " decode rank " + std::to_string(d);
      if (i == kRequests - 1) {
        EXPECT_TRUE(gpu[i].s.decode[d].planes() == want[i][d]) << what;
      } else {
        ExpectSame(want[i][d], *gpu[i].decode[d], what);
      }
    }
  }
  EXPECT_EQ((*receiver)->stats().ready_requests, uint64_t{kRequests});
}

// A device target (or device prefill cache) whose planes are host memory is the caller's error,
// refused before anything is expected (or sent).
TEST_P(HandoffNetworkGpuTest, HostMemoryNamedAsDeviceMemoryIsRefused) {
  std::mt19937_64 rng(29);
  HostScenario s = testing::MakeHostScenario(Latent(2, 1), rng);
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, Options());
  ASSERT_TRUE(receiver.ok());
  std::vector<DecodeTarget> targets;
  for (size_t d = 0; d < s.decode.size(); ++d) targets.push_back({&s.decode[d].cache(), s.decode_tables[d], 0});
  const Status st = (*receiver)->Expect(1, s.c.first_token, s.c.end_token, targets);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ((*receiver)->Poll(1)->code(), StatusCode::kNotFound);
  // The same on the sending side: refused before anything is sent, and the connection lives.
  for (DecodeTarget& t : targets) t.cuda_device = -1;
  ASSERT_TRUE((*receiver)->Expect(2, s.c.first_token, s.c.end_token, targets).ok());
  auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0);
  ASSERT_TRUE(sender.ok());
  const Status sent = (*sender)->Send(2, s.c.first_token, s.c.end_token, s.prefill[0].cache(), s.prefill_tables[0],
                                      WallClock::now() + 10s, 0);
  EXPECT_EQ(sent.code(), StatusCode::kInvalidArgument) << sent.ToString();
  EXPECT_TRUE((*sender)->Send(2, s.c.first_token, s.c.end_token, s.prefill[0].cache(), s.prefill_tables[0],
                              WallClock::now() + 10s).ok());
}

INSTANTIATE_TEST_SUITE_P(Hosts, HandoffNetworkGpuTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("tcp") : std::string("shm"); });

}  // namespace
}  // namespace kvpool::handoff
