#include "engine/kv_pattern.h"

#include <gtest/gtest.h>

#include <numeric>

#include "engine/host_kv_cache.h"
#include "engine/kv_handoff.h"

namespace kvpool::engine {
namespace {

TEST(KvPatternTest, BlockKeysChainAndFollowSharedPrefixes) {
  std::vector<connector::TokenId> a(100), b(100);
  std::iota(a.begin(), a.end(), 1);
  b = a;
  b[40] = -5;  // diverges in block 2 (16-token blocks)
  const auto ka = ChainBlockKeys(a, 16), kb = ChainBlockKeys(b, 16);
  ASSERT_EQ(ka.size(), 7u);  // 6 full + 1 partial
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  EXPECT_NE(ka[6], kb[6]);  // every later key changes
}

TEST(KvPatternTest, WrittenKvVerifiesAndACorruptByteIsCaught) {
  connector::PagedKvLayout layout;
  layout.num_layers = 2;
  layout.block_tokens = 16;
  layout.bytes_per_token_per_layer = 12;  // not a multiple of 8 on purpose
  HostKvCache cache(layout, 8);
  std::vector<connector::TokenId> tokens(40, 3);
  const auto keys = ChainBlockKeys(tokens, 16);
  const std::vector<connector::BlockId> table = {5, 0, 2};
  WriteKv(cache.cache(), table, 10, keys, 0, 40);
  EXPECT_EQ(CountKvMismatches(cache.cache(), table, 10, keys, 0, 40), 0u);
  EXPECT_EQ(CountKvMismatches(cache.cache(), table, 11, keys, 0, 40), 80u);  // other layers' bytes
  cache.cache().TokenAddress(table, 1, 0, 33)[11] ^= std::byte{1};
  EXPECT_EQ(CountKvMismatches(cache.cache(), table, 10, keys, 0, 40), 1u);
}

// Two stages into two DCP ranks with interleave 4: rank 0 holds tokens 0-3, 8-11, ..., rank 1
// tokens 4-7, 12-15, ...; each is verified in its own local order.
TEST(KvPatternTest, CpuHandoffMovesEveryStageIntoTheDecodeRanks) {
  connector::PagedKvLayout stage;
  stage.num_layers = 1;
  stage.block_tokens = 16;
  stage.bytes_per_token_per_layer = 8;
  HostKvCache s0(stage, 4), s1(stage, 4);
  connector::PagedKvLayout dec = stage;
  dec.num_layers = 2;
  HostKvCache rank0(dec, 3), rank1(dec, 3);
  std::vector<connector::TokenId> tokens(50, 9);
  const auto keys = ChainBlockKeys(tokens, 16);
  const std::vector<connector::BlockId> ptable = {3, 1, 0, 2}, table0 = {2, 0}, table1 = {1, 2};
  WriteKv(s0.cache(), ptable, 0, keys, 0, 50);
  WriteKv(s1.cache(), ptable, 1, keys, 0, 50);
  auto handoff = NewCpuKvHandoff();
  KvHandoffRequest r;
  r.tokens = 50;
  r.stage_caches = {&s0.cache(), &s1.cache()};
  r.stage_first_layers = {0, 1};
  r.stage_block_tables = {ptable, ptable};
  r.decode_caches = {&rank0.cache(), &rank1.cache()};
  r.decode_block_tables = {table0, table1};
  r.decode_interleave = 4;
  auto bytes = handoff->Transfer(r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, 50u * 2 * 8);
  const handoff::DcpTokenMap map{2, 4};
  ASSERT_EQ(map.CountBelow(0, 50), 26u);  // 0-3, 8-11, ..., 40-43, 48-49
  EXPECT_EQ(CountKvMismatches(rank0.cache(), table0, 0, keys, 0, 26, {map, 0}), 0u);
  EXPECT_EQ(CountKvMismatches(rank1.cache(), table1, 0, keys, 0, 24, {map, 1}), 0u);
  // Read as if it held every token, rank 0 is wrong from its 5th token on (global 8, not 4).
  EXPECT_GT(CountKvMismatches(rank0.cache(), table0, 0, keys, 0, 26), 0u);
  r.tokens = 65;  // beyond the block tables
  EXPECT_EQ(handoff->Transfer(r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::engine
