#include "connector/chunk_keys.h"

#include <gtest/gtest.h>

#include <numeric>

#include "connector/test_kv_cache.h"

namespace kvpool::connector {
namespace {

KvNamespace Ns(std::vector<uint32_t> split = {2, 2}) {
  return KvNamespace::Create(testing::SmallSpec(KvLayoutKind::kLatent, split)).value();
}

std::vector<TokenId> Tokens(size_t n) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), 1000);
  return t;
}

TEST(ChunkKeysTest, OnlyFullChunksGetKeys) {
  const KvNamespace ns = Ns();  // 64-token chunks
  EXPECT_EQ(ChainChunkKeys(ns, Tokens(63)).size(), 0u);
  EXPECT_EQ(ChainChunkKeys(ns, Tokens(64)).size(), 1u);
  EXPECT_EQ(ChainChunkKeys(ns, Tokens(64 * 5 + 63)).size(), 5u);
}

TEST(ChunkKeysTest, PartialTailDoesNotChangeFullChunks) {
  const KvNamespace ns = Ns();
  EXPECT_EQ(ChainChunkKeys(ns, Tokens(64 * 3)), ChainChunkKeys(ns, Tokens(64 * 3 + 40)));
}

TEST(ChunkKeysTest, ChangeAtTokenKeepsEveryEarlierChunk) {
  const KvNamespace ns = Ns();
  const std::vector<TokenId> base = Tokens(64 * 8);
  const auto base_keys = ChainChunkKeys(ns, base);
  for (size_t t : {0ul, 63ul, 64ul, 200ul, 64ul * 8 - 1}) {
    std::vector<TokenId> changed = base;
    changed[t] += 1;
    const auto keys = ChainChunkKeys(ns, changed);
    const size_t changed_chunk = t / 64;
    for (size_t c = 0; c < keys.size(); ++c) {
      if (c < changed_chunk) {
        EXPECT_EQ(keys[c], base_keys[c]) << "token " << t << " chunk " << c;
      } else {
        EXPECT_NE(keys[c], base_keys[c]) << "token " << t << " chunk " << c;  // the chain carries the change
      }
    }
  }
}

TEST(ChunkKeysTest, SameTokensOtherPositionOtherKey) {
  const KvNamespace ns = Ns();
  std::vector<TokenId> same(64 * 2, 7);
  const auto keys = ChainChunkKeys(ns, same);
  EXPECT_NE(keys[0], keys[1]);
}

TEST(ChunkKeysTest, NamespaceIsPartOfEveryKey) {
  const auto a = ChainChunkKeys(Ns({2, 2}), Tokens(128));
  const auto b = ChainChunkKeys(Ns({1, 3}), Tokens(128));
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[1], b[1]);
}

TEST(ChunkKeysTest, PoolNames) {
  const KvNamespace ns = Ns();
  const ChunkKey k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(ChunkGroupName(ns, k), ns.hex() + "/0123456789abcdeffedcba9876543210");
  EXPECT_EQ(StageObjectKey(ns, k, 1), ns.hex() + "/0123456789abcdeffedcba9876543210/s1");
}

}  // namespace
}  // namespace kvpool::connector
