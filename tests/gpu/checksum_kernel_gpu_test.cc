// The GPU's Checksum() (checksum_kernel.h) against the library's on the CPU, bit for bit: every
// length class, objects at odd addresses, digests into device and into mapped pinned memory;
// and the CUDA packer's unpack handing out the checksum of each object it copied, more objects
// than it has slots for, and a changed byte changing exactly that object's checksum. Skips
// when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/checksum.h"
#include "connector/checksum_kernel.h"
#include "connector/chunk_packing.h"

namespace kvpool::connector {
namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

class GpuChecksumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

std::vector<std::byte> RandomBytes(size_t n, uint64_t seed) {
  std::vector<std::byte> bytes(n);
  std::mt19937_64 rng(seed);
  for (std::byte& b : bytes) b = std::byte(rng());
  return bytes;
}

// Hashes `objects` objects of `object_bytes` on the GPU; `pinned_out` puts the digests in
// mapped pinned host memory, else in device memory.
std::vector<uint64_t> HashOnGpu(const std::vector<std::byte>& bytes, uint64_t object_bytes, uint64_t objects,
                                bool pinned_out) {
  std::vector<uint64_t> got(objects);
  std::byte* device = nullptr;
  uint64_t *scratch = nullptr, *out = nullptr;
  EXPECT_EQ(cudaMalloc(&device, bytes.size() + 1), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&scratch, DeviceHashScratchBytes(object_bytes, objects) + 8), cudaSuccess);
  EXPECT_EQ(pinned_out ? cudaHostAlloc(&out, objects * 8 + 8, cudaHostAllocMapped) : cudaMalloc(&out, objects * 8 + 8),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(HashObjectsOnDevice(device, object_bytes, objects, scratch, out, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(got.data(), out, objects * 8, cudaMemcpyDefault), cudaSuccess);
  cudaFree(device);
  cudaFree(scratch);
  pinned_out ? cudaFreeHost(out) : cudaFree(out);
  return got;
}

TEST_F(GpuChecksumTest, EqualsTheLibraryForEveryLengthClass) {
  // Odd sizes put every object after the first at an unaligned address.
  for (uint64_t object_bytes : {0, 1, 3, 4, 8, 9, 16, 17, 100, 128, 129, 200, 240, 241, 1023, 1024, 1025, 4160,
                                65537, 1000003, 3194880}) {
    const uint64_t objects = object_bytes > 100000 ? 3 : 37;
    const std::vector<std::byte> bytes = RandomBytes(object_bytes * objects, object_bytes);
    for (bool pinned_out : {false, true}) {
      const std::vector<uint64_t> got = HashOnGpu(bytes, object_bytes, objects, pinned_out);
      for (uint64_t i = 0; i < objects; ++i) {
        ASSERT_EQ(got[i], Checksum(bytes.data() + i * object_bytes, object_bytes))
            << "object " << i << " of " << object_bytes << " bytes" << (pinned_out ? " (pinned out)" : "");
      }
    }
  }
}

// A one-layer MLA cache of `blocks` blocks in device memory, and `chunks` packed objects in
// pinned host staging, each a chunk of one block.
struct UnpackSetup {
  PagedKvLayout layout;
  PagedKvCache cache;
  std::vector<BlockId> table;
  std::byte* staging = nullptr;
  uint64_t object_bytes = 0;
  UnpackSetup(uint64_t chunks, uint32_t token_bytes) {
    layout.kind = KvLayoutKind::kLatent;
    layout.num_layers = 2;
    layout.block_tokens = 16;
    layout.bytes_per_token_per_layer = token_bytes;
    object_bytes = layout.packed_chunk_bytes(16);
    cache = PagedKvCache{layout, {}, chunks};
    for (uint32_t p = 0; p < layout.num_planes(); ++p) {
      void* plane = nullptr;
      EXPECT_EQ(cudaMalloc(&plane, layout.plane_bytes(chunks)), cudaSuccess);
      cache.plane_bases.push_back(static_cast<std::byte*>(plane));
    }
    for (uint64_t c = 0; c < chunks; ++c) table.push_back(static_cast<BlockId>(chunks - 1 - c));
    EXPECT_EQ(cudaHostAlloc(&staging, chunks * object_bytes, cudaHostAllocDefault), cudaSuccess);
    const std::vector<std::byte> bytes = RandomBytes(chunks * object_bytes, chunks);
    std::copy(bytes.begin(), bytes.end(), staging);
  }
  ~UnpackSetup() {
    for (std::byte* p : cache.plane_bases) cudaFree(p);
    cudaFreeHost(staging);
  }
  uint64_t Want(uint64_t chunk) const { return Checksum(staging + chunk * object_bytes, object_bytes); }
};

TEST_F(GpuChecksumTest, UnpackHandsOutEachObjectsChecksum) {
  UnpackSetup s(12, 576);
  auto packer = NewCudaChunkPacker(0);
  ASSERT_TRUE(packer.ok()) << packer.status().ToString();
  ASSERT_TRUE((*packer)->HashesObjects());
  std::vector<uint64_t> got(12, 0);
  // All at once (one piece), then one chunk per unpack as the restore's mapped path does.
  ASSERT_TRUE((*packer)->Unpack({&s.cache, s.table, 16, 0, 12, 0, s.staging, got.data()}).ok());
  ASSERT_TRUE((*packer)->Wait().ok());
  for (uint64_t c = 0; c < 12; ++c) EXPECT_EQ(got[c], s.Want(c)) << "chunk " << c;

  s.staging[5 * s.object_bytes + 100] ^= std::byte{1};
  std::vector<uint64_t> again(12, 0);
  for (uint64_t c = 0; c < 12; ++c) {
    ASSERT_TRUE((*packer)->Unpack({&s.cache, s.table, 16, c, 1, 0, s.staging + c * s.object_bytes, &again[c]}).ok());
  }
  // Unhashed unpacks right behind reuse the bounce buffer the hashes may still be reading.
  for (uint64_t c = 11; c < 12; --c) {
    ASSERT_TRUE((*packer)->Unpack({&s.cache, s.table, 16, c, 1, 0, s.staging + c * s.object_bytes}).ok());
  }
  ASSERT_TRUE((*packer)->Wait().ok());
  for (uint64_t c = 0; c < 12; ++c) {
    EXPECT_EQ(again[c], s.Want(c)) << "chunk " << c;
    EXPECT_EQ(again[c] != got[c], c == 5) << "chunk " << c;
  }
}

TEST_F(GpuChecksumTest, UnpackHashesMoreObjectsThanItHasSlotsBeforeOneWait) {
  const uint64_t chunks = 5000;  // over the packer's 4096 pending checksums
  UnpackSetup s(chunks, 8);
  auto packer = NewCudaChunkPacker(0);
  ASSERT_TRUE(packer.ok()) << packer.status().ToString();
  std::vector<uint64_t> got(chunks, 0);
  for (uint64_t c = 0; c < chunks; ++c) {
    ASSERT_TRUE((*packer)->Unpack({&s.cache, s.table, 16, c, 1, 0, s.staging + c * s.object_bytes, &got[c]}).ok());
  }
  ASSERT_TRUE((*packer)->Wait().ok());
  for (uint64_t c = 0; c < chunks; ++c) ASSERT_EQ(got[c], s.Want(c)) << "chunk " << c;
}

}  // namespace
}  // namespace kvpool::connector
