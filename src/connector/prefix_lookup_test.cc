#include "connector/prefix_lookup.h"

#include <gtest/gtest.h>

#include <numeric>

#include "connector/test_kv_cache.h"
#include "connector/test_pool.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"

namespace kvpool::connector {
namespace {

class PrefixLookupTest : public ::testing::Test {
 protected:
  explicit PrefixLookupTest(uint32_t parts = 1, uint64_t lease_ms = 5000)
      : pool_(lease_ms, 64 << 20, parts),
        ns_(KvNamespace::Create(testing::SmallSpec(KvLayoutKind::kLatent, {1, 2, 1})).value()),
        store_(&pool_.client()) {}

  std::vector<TokenId> Tokens(size_t n) {
    std::vector<TokenId> t(n);
    std::iota(t.begin(), t.end(), 1);
    return t;
  }
  // Puts stage objects (right size, dummy bytes) for chunks [0, chunks) of `tokens`.
  void PutChunks(const std::vector<TokenId>& tokens, size_t chunks) {
    const auto keys = ChainChunkKeys(ns_, tokens);
    for (size_t c = 0; c < chunks; ++c) {
      for (uint32_t s = 0; s < ns_.spec().num_stages(); ++s) {
        std::vector<std::byte> value(ns_.spec().stage_object_bytes(s), std::byte{1});
        client::PutOptions o;
        o.group = ChunkGroupName(ns_, keys[c]);
        ASSERT_TRUE(pool_.client().Put(StageObjectKey(ns_, keys[c], s), value, o).ok());
      }
    }
  }

  testing::InProcessPool pool_;
  KvNamespace ns_;
  PoolChunkStore store_;
  ConnectorMetrics metrics_;
};

TEST_F(PrefixLookupTest, HitStopsAtTheFirstChunkSomeStageLacks) {
  const auto tokens = Tokens(64 * 6 + 10);
  PutChunks(tokens, 6);
  const auto keys = ChainChunkKeys(ns_, tokens);
  ASSERT_TRUE(pool_.client().Remove(StageObjectKey(ns_, keys[3], 2)).ok());  // stage 2 lacks chunk 3

  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->first_chunk, 0u);
  EXPECT_EQ(hit->hit_chunks, 3u);
  EXPECT_EQ(hit->restorable_tokens(), 3u * 64);
  EXPECT_EQ(metrics_.lookups.load(), 1u);
}

TEST_F(PrefixLookupTest, StartsBeyondWhatTheGpuHolds) {
  const auto tokens = Tokens(64 * 4);
  PutChunks(tokens, 4);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 100, &metrics_);  // GPU holds chunk 0 and part of 1
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->first_chunk, 1u);
  EXPECT_EQ(hit->hit_chunks, 3u);
  EXPECT_EQ(hit->end_token(), 256u);
  EXPECT_EQ(hit->restorable_tokens(), 156u);

  auto all_cached = FindCachedPrefix(store_, ns_, tokens, 256, &metrics_);
  ASSERT_TRUE(all_cached.ok());
  EXPECT_EQ(all_cached->restorable_tokens(), 0u);
  EXPECT_EQ(metrics_.lookups.load(), 1u);  // nothing left to look up: no round trip
}

TEST_F(PrefixLookupTest, ATurnThatChangesHistoryReusesUpToTheChange) {
  auto tokens = Tokens(64 * 5);
  PutChunks(tokens, 5);
  tokens[64 * 2 + 5] = -1;  // edit inside chunk 2
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 2u);
}

TEST_F(PrefixLookupTest, LongPromptIsOneRoundTrip) {
  const auto tokens = Tokens(64 * 2000);  // 6,000 stage keys
  PutChunks(tokens, 10);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 10u);
  EXPECT_EQ(metrics_.lookups.load(), 1u);
}

TEST_F(PrefixLookupTest, ObjectOfTheWrongSizeIsAMiss) {
  const auto tokens = Tokens(64 * 2);
  const auto keys = ChainChunkKeys(ns_, tokens);
  for (uint32_t s = 0; s < 3; ++s) {
    std::vector<std::byte> value(ns_.spec().stage_object_bytes(s) - (s == 1 ? 1 : 0));
    ASSERT_TRUE(pool_.client().Put(StageObjectKey(ns_, keys[0], s), value).ok());
  }
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 0u);
}

// Leases of a millisecond: what a lookup found can be evicted right after it.
class PrefixLookupMissTest : public PrefixLookupTest {
 protected:
  PrefixLookupMissTest() : PrefixLookupTest(1, /*lease_ms=*/1) {}
};

// Why a lookup stopped, from what the stages and their masters say of the chunk it stopped at.
TEST_F(PrefixLookupMissTest, SaysWhyALookupStopped) {
  const auto tokens = Tokens(64 * 3);
  const auto keys = ChainChunkKeys(ns_, tokens);
  const auto lookup = [&] {
    auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
    EXPECT_TRUE(hit.ok()) << hit.status().ToString();
    return hit.ok() ? *hit : PrefixHit{};
  };
  EXPECT_EQ(lookup().miss, MissReason::kNeverStored);  // nothing saved yet
  EXPECT_EQ(metrics_.lookup_miss_never_stored.load(), 1u);

  PutChunks(tokens, 3);
  EXPECT_EQ(lookup().miss, MissReason::kNone);

  ASSERT_TRUE(pool_.client().Remove(StageObjectKey(ns_, keys[2], 1)).ok());  // a removal is no eviction
  EXPECT_EQ(lookup().miss, MissReason::kPartialStages);
  EXPECT_EQ(metrics_.lookup_partial_chunks.load(), 1u);

  // A save of chunk 2's stage 1 that has not ended, the other stages' objects removed too.
  for (uint32_t s : {0u, 2u}) ASSERT_TRUE(pool_.client().Remove(StageObjectKey(ns_, keys[2], s)).ok());
  const std::string pending_key = StageObjectKey(ns_, keys[2], 1);
  master::PutStartItem item{pending_key, ns_.spec().stage_object_bytes(1)};
  ASSERT_TRUE(pool_.part(0).master().pool()->BatchPutStart({&item, 1}, {}).results[0].status.ok());
  PrefixHit pending = lookup();
  EXPECT_EQ(pending.miss, MissReason::kPending);
  EXPECT_EQ(pending.hit_chunks, 2u);
  EXPECT_EQ(metrics_.lookup_miss_pending.load(), 1u);

  // Other sessions' chunks fill the pool until the master evicts chunk 0, the oldest.
  const std::string chunk0 = StageObjectKey(ns_, keys[0], 0);
  const auto held = [&] {
    auto exists = pool_.client().Exists(chunk0);
    return !exists.ok() || *exists;
  };
  for (int i = 0; i < 200 && held(); ++i) {
    std::vector<std::byte> filler(1 << 20, std::byte{2});
    ASSERT_TRUE(pool_.client().Put("filler/" + std::to_string(i), filler).ok());
  }
  ASSERT_FALSE(held());
  PrefixHit evicted = lookup();
  EXPECT_EQ(evicted.miss, MissReason::kEvicted);
  EXPECT_EQ(evicted.hit_chunks, 0u);
  EXPECT_GE(evicted.miss_evicted_ms_ago, 1u);
  EXPECT_EQ(metrics_.lookup_miss_evicted.load(), 1u);
  EXPECT_EQ(metrics_.lookup_miss_evicted_age_seconds.count(), 1u);
  EXPECT_EQ(metrics_.lookup_miss_never_stored.load(), 1u);
  auto stat = pool_.client().Stat();
  ASSERT_TRUE(stat.ok());
  EXPECT_GE(stat->misses_evicted, uint64_t{ns_.spec().num_stages()});  // chunk 0's stages at least
}

TEST_F(PrefixLookupTest, RejectsMoreCachedTokensThanTheRequestHas) {
  EXPECT_EQ(FindCachedPrefix(store_, ns_, Tokens(10), 11, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// The published pool: every stage in its own part, with its own master and eviction.
class PrefixLookupOverPartsTest : public PrefixLookupTest {
 protected:
  PrefixLookupOverPartsTest() : PrefixLookupTest(3) {}
};

TEST_F(PrefixLookupOverPartsTest, EachStageLivesInItsOwnPart) {
  const auto tokens = Tokens(64 * 5);
  PutChunks(tokens, 5);
  auto stats = pool_.client().Stat();
  ASSERT_TRUE(stats.ok());
  for (uint32_t k = 0; k < 3; ++k) EXPECT_EQ(stats->parts[k].objects, 5u) << "part " << k;
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 5u);
  EXPECT_EQ(metrics_.lookup_partial_chunks.load(), 0u);
}

TEST_F(PrefixLookupOverPartsTest, EvictionInOnePartStopsTheHitForEveryStage) {
  const auto tokens = Tokens(64 * 6);
  PutChunks(tokens, 6);
  const auto keys = ChainChunkKeys(ns_, tokens);
  // Part 1 alone loses stage 1 of chunk 2; parts 0 and 2 still hold their stages of it.
  ASSERT_TRUE(pool_.client().Remove(StageObjectKey(ns_, keys[2], 1)).ok());
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 2u);
  EXPECT_EQ(metrics_.lookup_partial_chunks.load(), 1u);
  EXPECT_EQ(metrics_.lookup_unreachable_stages.load(), 0u);
}

TEST_F(PrefixLookupOverPartsTest, AnUnreachablePartIsNoHitForEveryStage) {
  const auto tokens = Tokens(64 * 4);
  PutChunks(tokens, 4);
  pool_.StopPart(2);  // stage 2's master and store are gone
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->hit_chunks, 0u);
  EXPECT_EQ(hit->restorable_tokens(), 0u);
  EXPECT_EQ(metrics_.lookup_unreachable_stages.load(), 1u);
  EXPECT_EQ(metrics_.lookup_partial_chunks.load(), 1u);  // stages 0 and 1 still hold chunk 0
}

}  // namespace
}  // namespace kvpool::connector
