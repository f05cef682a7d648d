#include "connector/paged_kv_layout.h"

#include <gtest/gtest.h>

namespace kvpool::connector {
namespace {

TEST(PagedKvLayoutTest, LatentAddressing) {
  PagedKvLayout l;
  l.kind = KvLayoutKind::kLatent;
  l.num_layers = 2;
  l.block_tokens = 16;
  l.bytes_per_token_per_layer = 576;
  ASSERT_TRUE(l.Validate().ok());
  EXPECT_EQ(l.planes_per_layer(), 1u);
  EXPECT_EQ(l.block_bytes(), 16u * 576);
  std::vector<std::byte> p0(l.plane_bytes(10)), p1(l.plane_bytes(10));
  PagedKvCache c{l, {p0.data(), p1.data()}, 10};
  ASSERT_TRUE(c.Validate().ok());
  const std::vector<BlockId> table = {7, 2, 9};
  // token 17 = logical block 1 (physical 2), offset 1
  EXPECT_EQ(c.TokenAddress(table, 1, 0, 17), p1.data() + 2 * 16 * 576 + 1 * 576);
  EXPECT_EQ(c.TokenAddress(table, 0, 0, 47), p0.data() + 9 * 16 * 576 + 15 * 576);
}

TEST(PagedKvLayoutTest, SplitKvAddressingWithInterleavedBlocks) {
  // One array [num_blocks][2][16 tokens][256 B]: K half then V half of every block.
  PagedKvLayout l;
  l.kind = KvLayoutKind::kSplitKv;
  l.num_layers = 1;
  l.block_tokens = 16;
  l.bytes_per_token_per_layer = 512;
  l.block_stride_bytes = 2 * 16 * 256;
  ASSERT_TRUE(l.Validate().ok());
  std::vector<std::byte> a(4 * l.block_stride());
  PagedKvCache c{l, {a.data(), a.data() + 16 * 256}, 4};
  const std::vector<BlockId> table = {3};
  EXPECT_EQ(c.TokenAddress(table, 0, 0, 5), a.data() + 3 * 8192 + 5 * 256);
  EXPECT_EQ(c.TokenAddress(table, 0, 1, 5), a.data() + 3 * 8192 + 4096 + 5 * 256);
}

TEST(PagedKvLayoutTest, PackedOffsetsAreLayerPlaneTokenMajor) {
  PagedKvLayout l;
  l.kind = KvLayoutKind::kSplitKv;
  l.num_layers = 3;
  l.bytes_per_token_per_layer = 512;
  EXPECT_EQ(l.packed_chunk_bytes(64), 64u * 512 * 3);
  EXPECT_EQ(l.packed_offset(64, 0, 0, 0), 0u);
  EXPECT_EQ(l.packed_offset(64, 0, 1, 0), 64u * 256);
  EXPECT_EQ(l.packed_offset(64, 2, 1, 3), (5u * 64 + 3) * 256);
}

TEST(PagedKvLayoutTest, RejectsBadCaches) {
  PagedKvLayout l;
  l.num_layers = 2;
  l.bytes_per_token_per_layer = 576;
  std::vector<std::byte> p(l.plane_bytes(1));
  EXPECT_FALSE((PagedKvCache{l, {p.data()}, 1}).Validate().ok());  // one plane for two layers
  l.block_stride_bytes = 100;                                    // below one block
  EXPECT_FALSE(l.Validate().ok());
}

}  // namespace
}  // namespace kvpool::connector
