// `kvpool replay --gpu`'s pieces on a real GPU: the device pattern kernels write exactly the
// bytes the CPU reference writes (and catch a corrupt byte; a DCP rank's cache verifies through
// its token map), and a tiny replay (decode DCP4) with every cache in
// device memory — CUDA packers restoring from and saving to the pool, the GPU handoff (or the
// network one, gathering and scattering on the GPUs) between the prefill and decode GPUs —
// verifies every byte. Skips when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/host_kv_cache.h"
#include "engine/kv_cache_memory.h"
#include "engine/kv_pattern.h"
#include "replay/replay_run.h"
#include "replay/test_tiny_replay.h"

namespace kvpool::replay {
namespace {

struct LayoutCase {
  const char* name;
  connector::KvLayoutKind kind;
  uint32_t bytes_per_token_per_layer;
};

class ReplayGpuPatternTest : public ::testing::TestWithParam<LayoutCase> {
 protected:
  void SetUp() override {
    if (engine::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(ReplayGpuPatternTest, DeviceKvEqualsTheCpuReference) {
  connector::PagedKvLayout layout;
  layout.kind = GetParam().kind;
  layout.num_layers = 3;
  layout.block_tokens = 16;
  layout.bytes_per_token_per_layer = GetParam().bytes_per_token_per_layer;
  const uint64_t num_blocks = 40, tokens = 300;
  std::vector<connector::BlockId> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(7));
  std::vector<connector::TokenId> ids(tokens);
  std::iota(ids.begin(), ids.end(), 100);
  const std::vector<uint64_t> keys = engine::ChainBlockKeys(ids, layout.block_tokens);

  engine::HostKvCache host(layout, num_blocks);
  engine::WriteKv(host.cache(), table, 5, keys, 0, tokens);
  auto device = engine::NewKvCacheMemory(layout, num_blocks, 0);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  ASSERT_TRUE((*device)->WriteKv(table, 5, keys, 0, 130).ok());  // two calls, ranges not block-aligned
  ASSERT_TRUE((*device)->WriteKv(table, 5, keys, 130, tokens).ok());

  const uint64_t plane_bytes = layout.plane_bytes(num_blocks);
  std::vector<std::byte> copy(plane_bytes);
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    ASSERT_EQ(cudaMemcpy(copy.data(), (*device)->cache().plane_bases[p], plane_bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(copy.data(), host.cache().plane_bases[p], plane_bytes), 0) << "plane " << p;
  }
  EXPECT_EQ((*device)->CountKvMismatches(table, 5, keys, 0, tokens, {}).value(), 0u);
  EXPECT_EQ((*device)->CountKvMismatches(table, 6, keys, 0, tokens, {}).value(), tokens * layout.num_planes());

  // A DCP rank's cache (rank 1 of 3, interleave 2: tokens 2-3, 8-9, ...) in its local order,
  // built from the host cache and checked on the device through the local -> global map.
  const engine::CacheTokens rank1{handoff::DcpTokenMap{3, 2}, 1};
  const uint64_t held = rank1.map.CountBelow(1, tokens);
  engine::HostKvCache rank_host(layout, num_blocks);
  for (uint64_t j = 0; j < held; ++j) {
    for (uint32_t l = 0; l < layout.num_layers; ++l) {
      for (uint32_t p = 0; p < layout.planes_per_layer(); ++p) {
        std::memcpy(rank_host.cache().TokenAddress(table, l, p, j), host.cache().TokenAddress(table, l, p, rank1.Global(j)),
                    layout.plane_token_bytes());
      }
    }
  }
  auto rank_device = engine::NewKvCacheMemory(layout, num_blocks, 0);
  ASSERT_TRUE(rank_device.ok());
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    ASSERT_EQ(cudaMemcpy((*rank_device)->cache().plane_bases[p], rank_host.cache().plane_bases[p], plane_bytes,
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  EXPECT_EQ((*rank_device)->CountKvMismatches(table, 5, keys, 0, held, rank1).value(), 0u);
  EXPECT_GT((*rank_device)->CountKvMismatches(table, 5, keys, 0, held, {}).value(), 0u);
  // One corrupt byte in one (token, layer, plane) entry.
  std::byte* entry = host.cache().TokenAddress(table, 1, layout.planes_per_layer() - 1, 77);
  const std::byte wrong = entry[layout.plane_token_bytes() - 1] ^ std::byte{1};
  std::byte* device_entry = (*device)->cache().TokenAddress(table, 1, layout.planes_per_layer() - 1, 77);
  ASSERT_EQ(cudaMemcpy(device_entry + layout.plane_token_bytes() - 1, &wrong, 1, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ((*device)->CountKvMismatches(table, 5, keys, 0, tokens, {}).value(), 1u);
  // A block id outside the cache is refused before any kernel runs.
  std::vector<connector::BlockId> bad = table;
  bad[3] = static_cast<connector::BlockId>(num_blocks);
  EXPECT_EQ((*device)->WriteKv(bad, 5, keys, 0, tokens).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ReplayGpuPatternTest,
                         ::testing::Values(LayoutCase{"latent8", connector::KvLayoutKind::kLatent, 8},
                                           LayoutCase{"latent576", connector::KvLayoutKind::kLatent, 576},
                                           LayoutCase{"split12", connector::KvLayoutKind::kSplitKv, 12},
                                           LayoutCase{"split624", connector::KvLayoutKind::kSplitKv, 624}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReplayGpuRunTest, EveryByteVerifiesWithCachesOnTheGpus) {
  const int gpus = engine::CudaDeviceCount();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  const trace::Corpus corpus = testing::SmallCorpus();
  // The default handoff with --gpu (kernels and peer copies), and the network one with the
  // gather and scatter kernels on the caches' GPUs around the transfer engine.
  for (const std::string handoff : {"gpu", "network"}) {
    for (bool use_pool : {true, false}) {
      SCOPED_TRACE(handoff + (use_pool ? " handoff, pool" : " handoff, no pool"));
      ReplayRunOptions o = testing::TinyRun(use_pool);
      o.gpus = std::min(gpus, 2);
      o.handoff = handoff;
      auto s = RunReplay(corpus, o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_EQ(s->handoff, handoff);
      EXPECT_EQ(s->verification_errors, 0u);
      EXPECT_EQ(s->failed_requests, 0) << s->first_failure;
      EXPECT_GE(s->requests, 12);
      EXPECT_GT(s->handoff_bytes, 0u);
      if (use_pool) {
        EXPECT_GT(s->restores, 0);
        EXPECT_GT(s->pool_tokens, 0u);
        EXPECT_GT(s->save_bytes, 0u);
      }
      std::printf("%s", FormatSummary(*s).c_str());
    }
  }
}

}  // namespace
}  // namespace kvpool::replay
