// The CUDA handoff against the CPU reference (src/handoff): for random layouts (PP splits, W,
// interleave, block sizes, latent and K/V split, strided blocks, odd row sizes that force every
// load width) the CUDA gather + copy + scatter and the pipelined transfer (peer copy, and the
// pinned-host bounce; batched or one copy per piece; fresh or reloaded device tables) leave the
// decode caches byte-identical to the CPU path: every token-layer at its (rank, block, slot),
// every other byte untouched. Prefill caches live on GPU 0, decode caches on GPU 1 when there
// are two GPUs, else on GPU 0 too. Skips when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include "handoff/handoff_copy.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/test_handoff_caches.h"
#include "device_cache.h"

namespace kvpool::handoff {
namespace {

using testing::DeviceCache;
using testing::ExpectSame;
using testing::Upload;

void Reset(const testing::HostCache& host, DeviceCache& d) {
  ASSERT_EQ(cudaSetDevice(d.device), cudaSuccess);
  for (size_t i = 0; i < host.planes().size(); ++i) {
    CUDA_OK(cudaMemcpy(d.allocs[i], host.planes()[i].data(), host.planes()[i].size(), cudaMemcpyHostToDevice));
  }
}

class HandoffGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int n = HandoffCudaDeviceCount();
    if (n == 0) GTEST_SKIP() << "no CUDA device";
    decode_device_ = n > 1 ? 1 : 0;
  }
  int prefill_device_ = 0;
  int decode_device_ = 0;
};

TEST_F(HandoffGpuTest, KernelsAndPipelineMatchTheCpuReference) {
  std::mt19937_64 rng(77);
  for (int iter = 0; iter < 12; ++iter) {
    testing::RandomCase c = testing::MakeRandomCase(rng);
    if (iter == 0) {  // one MLA-shaped case with 16-byte vectors and PP 4 / DCP 4
      c.prefill.kind = c.decode.kind = KvLayoutKind::kLatent;
      c.prefill.bytes_per_token_per_layer = c.decode.bytes_per_token_per_layer = 576;
      c.prefill.stage_layers = {3, 3, 3, 2};
      c.decode.num_layers = 11;
      c.decode.dcp_ranks = 4;
      c.decode.interleave = 1;
      c.prefill.block_tokens = 64;
      c.decode.block_tokens = 16;
      c.first_token = 256;
      c.end_token = 256 + 1000;
      c.extra_stride = 0;
    }
    SCOPED_TRACE("iter " + std::to_string(iter) + " W=" + std::to_string(c.decode.dcp_ranks) + " I=" +
                 std::to_string(c.decode.interleave) + " bytes=" + std::to_string(c.decode.bytes_per_token_per_layer));
    testing::HostScenario s = testing::MakeHostScenario(c, rng);
    const uint32_t row = c.decode.RankLayout().plane_token_bytes();
    HandoffPlanOptions opt;
    opt.max_write_bytes = row * (1 + rng() % 64);  // many pieces: every slot is reused
    auto plan_or = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token, opt);
    ASSERT_TRUE(plan_or.ok()) << plan_or.status().ToString();
    const HandoffPlan& plan = *plan_or;
    const auto want = testing::ExpectedDecodePlanes(s);

    // Device twins and device tables.
    std::vector<DeviceCache> pre(c.prefill.num_ranks()), dec(c.decode.dcp_ranks);
    std::vector<std::unique_ptr<DeviceKvTable>> pre_t, dec_t;
    for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
      Upload(s.prefill[p], prefill_device_, pre[p]);
      auto t = DeviceKvTable::Upload(pre[p].cache, s.prefill_tables[p], prefill_device_);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      pre_t.push_back(std::move(*t));
    }
    std::vector<const DeviceKvTable*> dec_ptrs;
    for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
      Upload(s.decode[d], decode_device_, dec[d]);
      auto t = DeviceKvTable::Upload(dec[d].cache, s.decode_tables[d], decode_device_);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      dec_t.push_back(std::move(*t));
      dec_ptrs.push_back(dec_t.back().get());
    }

    // 1. GatherCuda -> peer copy -> ScatterCuda, whole buffers; the gather buffer also equals
    //    the CPU's byte for byte.
    {
      cudaStream_t ps, ds;
      CUDA_OK(cudaSetDevice(prefill_device_));
      CUDA_OK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
      CUDA_OK(cudaSetDevice(decode_device_));
      CUDA_OK(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
      for (const PairPlan& pair : plan.pairs) {
        if (pair.num_tokens == 0) continue;
        void *gbuf, *lbuf;
        CUDA_OK(cudaSetDevice(prefill_device_));
        CUDA_OK(cudaMalloc(&gbuf, pair.bytes()));
        CUDA_OK(cudaSetDevice(decode_device_));
        CUDA_OK(cudaMalloc(&lbuf, pair.bytes()));
        ASSERT_TRUE(GatherCuda(pair, *pre_t[pair.prefill_rank], static_cast<std::byte*>(gbuf), ps).ok());
        CUDA_OK(cudaStreamSynchronize(ps));
        std::vector<std::byte> cpu(pair.bytes()), gpu(pair.bytes());
        ASSERT_TRUE(
            GatherCpu(pair, s.prefill[pair.prefill_rank].cache(), s.prefill_tables[pair.prefill_rank], cpu.data())
                .ok());
        CUDA_OK(cudaMemcpy(gpu.data(), gbuf, pair.bytes(), cudaMemcpyDeviceToHost));
        ASSERT_TRUE(cpu == gpu) << "gather buffer of pair (" << pair.prefill_rank << ", " << pair.decode_rank << ")";
        // On the gather stream: cudaMemcpyPeer would not order itself with the non-blocking streams.
        CUDA_OK(cudaMemcpyPeerAsync(lbuf, decode_device_, gbuf, prefill_device_, pair.bytes(), ps));
        CUDA_OK(cudaStreamSynchronize(ps));
        ASSERT_TRUE(ScatterCuda(pair, static_cast<std::byte*>(lbuf), *dec_t[pair.decode_rank], ds).ok());
        CUDA_OK(cudaStreamSynchronize(ds));
        CUDA_OK(cudaFree(gbuf));
        CUDA_OK(cudaFree(lbuf));
      }
      for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d)
        ExpectSame(want[d], dec[d], "kernels, decode rank " + std::to_string(d));
      CUDA_OK(cudaStreamDestroy(ps));
      CUDA_OK(cudaStreamDestroy(ds));
    }

    // 2. The pipeline, with peer copies and with the pinned-host bounce.
    for (bool allow_peer : {true, false}) {
      for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) Reset(s.decode[d], dec[d]);
      HandoffPipelineOptions po;
      po.slot_bytes = opt.max_write_bytes;
      po.slots = 2 + static_cast<uint32_t>(rng() % 8);  // copy batches of 1 to 4 pieces
      po.batch_copies = rng() % 4 != 0;                   // sometimes one copy per piece
      po.allow_peer = allow_peer;
      po.kernel_blocks = rng() % 2 ? 0 : 1 + static_cast<uint32_t>(rng() % 3);  // capped grids stride
      SCOPED_TRACE("slots " + std::to_string(po.slots) + ", kernel blocks " + std::to_string(po.kernel_blocks) +
                   (po.batch_copies ? ", batched copies" : ", one copy per piece"));
      auto pipe = HandoffPipeline::Create(prefill_device_, decode_device_, po);
      ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
      CUDA_OK(cudaSetDevice(decode_device_));
      cudaEvent_t done;
      CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
        const Status st = (*pipe)->Transfer(plan, p, *pre_t[p], dec_ptrs, done);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
      CUDA_OK(cudaEventSynchronize(done));
      ASSERT_TRUE((*pipe)->Synchronize().ok());
      EXPECT_EQ((*pipe)->pieces_moved(), plan.total_writes());
      const std::string what = allow_peer ? "pipeline (peer copies)" : "pipeline (pinned bounce)";
      for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d)
        ExpectSame(want[d], dec[d], what + ", decode rank " + std::to_string(d));
      CUDA_OK(cudaEventDestroy(done));
    }
  }
}

// The replay keeps one DeviceKvTable per cache and reloads it per request. Tables first made
// for a one-block request must grow on reload; a reload with a bad id changes nothing; after the
// reload the pipeline's result equals the CPU reference.
TEST_F(HandoffGpuTest, ReloadedTablesServeTheNextRequest) {
  std::mt19937_64 rng(21);
  testing::RandomCase c = testing::MakeRandomCase(rng);
  testing::HostScenario s = testing::MakeHostScenario(c, rng);
  auto plan = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto want = testing::ExpectedDecodePlanes(s);
  std::vector<DeviceCache> pre(c.prefill.num_ranks()), dec(c.decode.dcp_ranks);
  std::vector<std::unique_ptr<DeviceKvTable>> pre_t, dec_t;
  std::vector<const DeviceKvTable*> dec_ptrs;
  for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
    Upload(s.prefill[p], prefill_device_, pre[p]);
    const std::span<const BlockId> table(s.prefill_tables[p]);
    auto t = DeviceKvTable::Upload(pre[p].cache, table.first(std::min<size_t>(1, table.size())), prefill_device_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    pre_t.push_back(std::move(*t));
  }
  for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
    Upload(s.decode[d], decode_device_, dec[d]);
    const std::span<const BlockId> table(s.decode_tables[d]);
    auto t = DeviceKvTable::Upload(dec[d].cache, table.first(std::min<size_t>(1, table.size())), decode_device_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    dec_t.push_back(std::move(*t));
    dec_ptrs.push_back(dec_t.back().get());
  }
  auto bad = s.decode_tables[0];
  bad.push_back(static_cast<BlockId>(dec[0].cache.num_blocks));
  const size_t before = dec_t[0]->table().size();
  EXPECT_EQ(dec_t[0]->Reload(dec[0].cache, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dec_t[0]->table().size(), before);  // unchanged
  for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
    ASSERT_TRUE(pre_t[p]->Reload(pre[p].cache, s.prefill_tables[p]).ok());
  }
  for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
    ASSERT_TRUE(dec_t[d]->Reload(dec[d].cache, s.decode_tables[d]).ok());
  }
  auto pipe = HandoffPipeline::Create(prefill_device_, decode_device_);
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  CUDA_OK(cudaSetDevice(decode_device_));
  cudaEvent_t done;
  CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  for (uint32_t p = 0; p < c.prefill.num_ranks(); ++p) {
    const Status st = (*pipe)->Transfer(*plan, p, *pre_t[p], dec_ptrs, done);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  CUDA_OK(cudaEventSynchronize(done));
  for (uint32_t d = 0; d < c.decode.dcp_ranks; ++d) {
    ExpectSame(want[d], dec[d], "reloaded tables, rank " + std::to_string(d));
  }
  CUDA_OK(cudaEventDestroy(done));
}

TEST_F(HandoffGpuTest, BadTablesAreRejectedBeforeAnyLaunch) {
  std::mt19937_64 rng(9);
  testing::RandomCase c = testing::MakeRandomCase(rng);
  testing::HostScenario s = testing::MakeHostScenario(c, rng);
  DeviceCache pre;
  Upload(s.prefill[0], prefill_device_, pre);
  auto bad = s.prefill_tables[0];
  bad.back() = static_cast<BlockId>(pre.cache.num_blocks);
  EXPECT_EQ(DeviceKvTable::Upload(pre.cache, bad, prefill_device_).status().code(), StatusCode::kInvalidArgument);
  // Host memory is not a device cache.
  EXPECT_EQ(DeviceKvTable::Upload(s.prefill[0].cache(), s.prefill_tables[0], prefill_device_).status().code(),
            StatusCode::kInvalidArgument);
  // A table that does not cover the range.
  auto plan = PlanHandoff(c.prefill, c.decode, c.first_token, c.end_token).value();
  std::vector<BlockId> short_table(s.prefill_tables[0].begin(), s.prefill_tables[0].begin());  // empty
  auto t = DeviceKvTable::Upload(pre.cache, short_table, prefill_device_);
  ASSERT_TRUE(t.ok());
  const PairPlan* pair = nullptr;
  for (uint32_t d = 0; d < c.decode.dcp_ranks && pair == nullptr; ++d) {
    if (plan.pair(0, d).num_tokens > 0) pair = &plan.pair(0, d);
  }
  ASSERT_NE(pair, nullptr);
  void* buf;
  CUDA_OK(cudaMalloc(&buf, pair->bytes()));
  EXPECT_EQ(GatherCuda(*pair, **t, static_cast<std::byte*>(buf), nullptr).code(), StatusCode::kInvalidArgument);
  CUDA_OK(cudaFree(buf));
}

}  // namespace
}  // namespace kvpool::handoff
