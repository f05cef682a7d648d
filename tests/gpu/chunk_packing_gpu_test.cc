// The CUDA packer against the CPU reference: same packed bytes from the same cache, same
// cache contents after unpacking, for MLA and K/V-split layouts, device and pinned-host
// staging, and alignments that force every load width. Skips when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "connector/chunk_packing.h"

namespace kvpool::connector {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

struct Case {
  const char* name;
  KvLayoutKind kind;
  uint32_t bytes;        // per token per layer
  uint64_t stride_extra; // > 0: non-dense blocks
  bool pinned_staging;   // else device staging
};

std::vector<BlockId> Table(uint64_t blocks, uint64_t num_blocks, uint64_t seed) {
  std::vector<BlockId> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  all.resize(blocks);
  return all;
}

class GpuChunkPackingTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(GpuChunkPackingTest, MatchesTheCpuReference) {
  const Case c = GetParam();
  PagedKvLayout layout;
  layout.kind = c.kind;
  layout.num_layers = 3;
  layout.block_tokens = 16;
  layout.bytes_per_token_per_layer = c.bytes;
  if (c.stride_extra) layout.block_stride_bytes = layout.block_bytes() + c.stride_extra;
  const uint32_t chunk_tokens = 64;
  const uint64_t num_blocks = 96, chunks = 6, keep_below = 64 + 21;
  const uint64_t plane_bytes = layout.plane_bytes(num_blocks);
  const uint64_t staging_bytes = chunks * layout.packed_chunk_bytes(chunk_tokens);

  // Host reference caches and their device twins.
  std::vector<std::vector<std::byte>> host_src(layout.num_planes()), host_dst(layout.num_planes());
  std::mt19937_64 rng(42);
  PagedKvCache hsrc{layout, {}, num_blocks}, hdst{layout, {}, num_blocks}, dsrc{layout, {}, num_blocks},
      ddst{layout, {}, num_blocks};
  std::vector<void*> device_allocs;
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    host_src[p].resize(plane_bytes);
    host_dst[p].resize(plane_bytes);
    for (auto& b : host_src[p]) b = std::byte(rng());
    for (auto& b : host_dst[p]) b = std::byte(rng());
    void *s, *d;
    CUDA_OK(cudaMalloc(&s, plane_bytes));
    CUDA_OK(cudaMalloc(&d, plane_bytes));
    device_allocs.push_back(s);
    device_allocs.push_back(d);
    CUDA_OK(cudaMemcpy(s, host_src[p].data(), plane_bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d, host_dst[p].data(), plane_bytes, cudaMemcpyHostToDevice));
    hsrc.plane_bases.push_back(host_src[p].data());
    hdst.plane_bases.push_back(host_dst[p].data());
    dsrc.plane_bases.push_back(static_cast<std::byte*>(s));
    ddst.plane_bases.push_back(static_cast<std::byte*>(d));
  }
  const auto src_table = Table(chunks * 4, num_blocks, 1), dst_table = Table(chunks * 4, num_blocks, 2);

  std::byte* staging = nullptr;
  if (c.pinned_staging) {
    CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&staging), staging_bytes, cudaHostAllocDefault));
  } else {
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&staging), staging_bytes));
  }
  std::vector<std::byte> want(staging_bytes), got(staging_bytes);
  auto cpu = NewCpuChunkPacker();
  auto gpu_or = NewCudaChunkPacker(0);
  ASSERT_TRUE(gpu_or.ok()) << gpu_or.status().ToString();
  auto& gpu = *gpu_or;

  // Pack chunks 1..5 (not starting at 0, so chunk offsets into the block table are exercised).
  ASSERT_TRUE(cpu->Pack({&hsrc, src_table, chunk_tokens, 1, chunks - 1, 0, want.data()}).ok());
  ASSERT_TRUE(gpu->Pack({&dsrc, src_table, chunk_tokens, 1, chunks - 1, 0, staging}).ok());
  ASSERT_TRUE(gpu->Wait().ok());
  const uint64_t packed = (chunks - 1) * layout.packed_chunk_bytes(chunk_tokens);
  CUDA_OK(cudaMemcpy(got.data(), staging, packed, cudaMemcpyDefault));
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), packed)) << "packed bytes differ";

  // Unpack them into the other cache, leaving the first keep_below tokens alone.
  ASSERT_TRUE(cpu->Unpack({&hdst, dst_table, chunk_tokens, 1, chunks - 1, keep_below, want.data()}).ok());
  ASSERT_TRUE(gpu->Unpack({&ddst, dst_table, chunk_tokens, 1, chunks - 1, keep_below, staging}).ok());
  ASSERT_TRUE(gpu->Wait().ok());
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    std::vector<std::byte> back(plane_bytes);
    CUDA_OK(cudaMemcpy(back.data(), ddst.plane_bases[p], plane_bytes, cudaMemcpyDeviceToHost));
    ASSERT_EQ(0, std::memcmp(back.data(), host_dst[p].data(), plane_bytes)) << "plane " << p;
  }
  // And the bad-block check runs before any launch.
  std::vector<BlockId> bad = dst_table;
  bad[5] = static_cast<BlockId>(num_blocks);
  EXPECT_EQ(gpu->Unpack({&ddst, bad, chunk_tokens, 0, 2, 0, staging}).code(), StatusCode::kInvalidArgument);

  if (c.pinned_staging) {
    CUDA_OK(cudaFreeHost(staging));
  } else {
    CUDA_OK(cudaFree(staging));
  }
  for (void* p : device_allocs) CUDA_OK(cudaFree(p));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GpuChunkPackingTest,
    ::testing::Values(Case{"mla576_device", KvLayoutKind::kLatent, 576, 0, false},
                      Case{"mla576_pinned", KvLayoutKind::kLatent, 576, 0, true},
                      Case{"gqa_split_device", KvLayoutKind::kSplitKv, 512, 0, false},
                      Case{"gqa_split_strided_pinned", KvLayoutKind::kSplitKv, 512, 2048, true},
                      Case{"odd_sizes_8B", KvLayoutKind::kSplitKv, 72, 0, false},
                      Case{"odd_sizes_4B", KvLayoutKind::kSplitKv, 36, 0, true},
                      Case{"odd_sizes_1B", KvLayoutKind::kLatent, 7, 0, false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvpool::connector
