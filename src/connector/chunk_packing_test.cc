#include "connector/chunk_packing.h"

#include <gtest/gtest.h>

#include "connector/test_kv_cache.h"

namespace kvpool::connector {
namespace {

struct Case {
  const char* name;
  KvLayoutKind kind;
  uint32_t bytes;
  uint64_t stride_extra;  // > 0: blocks spaced wider than dense
};

class ChunkPackingTest : public ::testing::TestWithParam<Case> {};

PagedKvLayout LayoutFor(const Case& c) {
  PagedKvLayout l;
  l.kind = c.kind;
  l.num_layers = 3;
  l.block_tokens = 16;
  l.bytes_per_token_per_layer = c.bytes;
  if (c.stride_extra) l.block_stride_bytes = l.block_bytes() + c.stride_extra;
  return l;
}

TEST_P(ChunkPackingTest, PackThenUnpackRoundTripsRandomBlockTables) {
  const PagedKvLayout layout = LayoutFor(GetParam());
  const uint32_t chunk_tokens = 64;
  const uint64_t num_blocks = 64, chunks = 5;
  auto packer = NewCpuChunkPacker();
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    testing::HostKvCache src(layout, num_blocks), dst(layout, num_blocks);
    src.FillRandom(seed);
    const auto src_table = testing::RandomBlockTable(chunks * 4, num_blocks, seed);
    const auto dst_table = testing::RandomBlockTable(chunks * 4, num_blocks, seed + 100);
    std::vector<std::byte> staging(chunks * layout.packed_chunk_bytes(chunk_tokens));

    ChunkTransfer t{&src.cache(), src_table, chunk_tokens, 0, chunks, 0, staging.data()};
    ASSERT_TRUE(packer->Pack(t).ok());
    ASSERT_TRUE(packer->Wait().ok());
    // The packed object is [layer][plane][token]: check one token of the last chunk directly.
    const uint64_t token = 4 * 64 + 17;
    const std::vector<std::byte> want = src.TokenBytes(src_table, token);
    const uint32_t tb = layout.plane_token_bytes();
    for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < layout.planes_per_layer(); ++plane) {
        const std::byte* packed = staging.data() + 4 * layout.packed_chunk_bytes(chunk_tokens) +
                                  layout.packed_offset(chunk_tokens, layer, plane, 17);
        const size_t at = (layer * layout.planes_per_layer() + plane) * tb;
        ASSERT_EQ(0, memcmp(packed, want.data() + at, tb));
      }
    }

    ChunkTransfer u{&dst.cache(), dst_table, chunk_tokens, 0, chunks, 0, staging.data()};
    ASSERT_TRUE(packer->Unpack(u).ok());
    for (uint64_t tok = 0; tok < chunks * chunk_tokens; ++tok) {
      ASSERT_EQ(src.TokenBytes(src_table, tok), dst.TokenBytes(dst_table, tok)) << "token " << tok;
    }
  }
}

TEST_P(ChunkPackingTest, UnpackLeavesGpuCachedTokensAlone) {
  const PagedKvLayout layout = LayoutFor(GetParam());
  const uint32_t chunk_tokens = 64;
  testing::HostKvCache src(layout, 16), dst(layout, 16);
  src.FillRandom(7);
  dst.FillRandom(8);
  const auto table = testing::RandomBlockTable(8, 16, 3);
  std::vector<std::byte> staging(2 * layout.packed_chunk_bytes(chunk_tokens));
  auto packer = NewCpuChunkPacker();
  ASSERT_TRUE(packer->Pack({&src.cache(), table, chunk_tokens, 0, 2, 0, staging.data()}).ok());
  const auto before = dst.TokenBytes(table, 69);
  // The GPU holds 70 tokens: chunk 1 is restored from token 70 on only.
  ASSERT_TRUE(packer->Unpack({&dst.cache(), table, chunk_tokens, 1, 1, 70, staging.data() +
                                                                               layout.packed_chunk_bytes(chunk_tokens)})
                  .ok());
  EXPECT_EQ(dst.TokenBytes(table, 69), before);
  for (uint64_t tok = 70; tok < 128; ++tok) EXPECT_EQ(dst.TokenBytes(table, tok), src.TokenBytes(table, tok));
}

TEST_P(ChunkPackingTest, BadBlockIdsAreRefusedBeforeAnyCopy) {
  const PagedKvLayout layout = LayoutFor(GetParam());
  testing::HostKvCache cache(layout, 8);
  std::vector<std::byte> staging(layout.packed_chunk_bytes(64));
  auto packer = NewCpuChunkPacker();
  const std::vector<BlockId> out_of_range = {0, 1, 2, 8};
  EXPECT_EQ(packer->Unpack({&cache.cache(), out_of_range, 64, 0, 1, 0, staging.data()}).code(),
            StatusCode::kInvalidArgument);
  const std::vector<BlockId> too_short = {0, 1, 2};
  EXPECT_EQ(packer->Pack({&cache.cache(), too_short, 64, 0, 1, 0, staging.data()}).code(),
            StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ChunkPackingTest,
                         ::testing::Values(Case{"mla576", KvLayoutKind::kLatent, 576, 0},
                                           Case{"gqa_split_kv", KvLayoutKind::kSplitKv, 512, 0},
                                           Case{"gqa_split_kv_strided", KvLayoutKind::kSplitKv, 256, 4096}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CudaPackerTest, UnavailableWithoutCudaBuild) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present; tests/gpu covers it";
  EXPECT_FALSE(NewCudaChunkPacker(0).ok());
}

}  // namespace
}  // namespace kvpool::connector
