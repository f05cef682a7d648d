#include "connector/save_engine.h"

#include <gtest/gtest.h>

#include <numeric>

#include "connector/prefix_lookup.h"
#include "connector/test_pool.h"
#include "connector/test_stages.h"

namespace kvpool::connector {
namespace {

class SaveEngineTest : public ::testing::TestWithParam<testing::PoolKind> {
 protected:
  SaveEngineTest()
      : pool_(GetParam(), 5000),
        ns_(KvNamespace::Create(testing::SmallSpec(KvLayoutKind::kSplitKv, {2, 1}, 512)).value()),
        pool_store_(pool_.store()),
        store_(&pool_store_),
        stages_(ns_.spec(), 64) {
    stages_.FillRandom(1);
  }
  std::unique_ptr<SaveEngine> Engine(SaveOptions o = {}) {
    o.staging_bytes_per_stage = 2 * ns_.spec().stage_object_bytes(0);  // windows of 2 chunks
    auto e = SaveEngine::Create(&store_, ns_, stages_.Devices(), o, &metrics_);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }
  std::vector<TokenId> Tokens(size_t n) {
    std::vector<TokenId> t(n);
    std::iota(t.begin(), t.end(), 5);
    return t;
  }
  std::vector<std::vector<BlockId>> Tables(size_t tokens) {
    const size_t blocks = (tokens + 15) / 16;
    return {testing::RandomBlockTable(blocks, 64, 1), testing::RandomBlockTable(blocks, 64, 2)};
  }

  // Whether the pool holds `key` now.
  bool Holds(const std::string& key) { return pool_store_.Exists(std::span(&key, 1)).value().at(0); }

  testing::EnginePool pool_;
  KvNamespace ns_;
  ChunkStore& pool_store_;
  testing::InterposedChunkStore store_;
  testing::HostStages stages_;
  ConnectorMetrics metrics_;
};

TEST_P(SaveEngineTest, SavesEveryFullChunkOfEveryStageButNotTheTail) {
  auto engine = Engine();
  const auto tokens = Tokens(64 * 5 + 30);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(tokens.size())).ok());
  const SaveOutcome out = engine->Wait(1, testing::LongDeadline());
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.objects_put, 10u);  // 5 chunks x 2 stages
  EXPECT_EQ(out.objects_skipped, 0u);
  const auto keys = ChainChunkKeys(ns_, tokens);
  for (uint32_t s = 0; s < 2; ++s) EXPECT_TRUE(Holds(StageObjectKey(ns_, keys[4], s)));
  // The 30-token tail has no key at all, and a 6th chunk of other tokens is not in the pool.
  auto longer = tokens;
  longer.resize(64 * 6, 0);
  const auto longer_keys = ChainChunkKeys(ns_, longer);
  EXPECT_FALSE(Holds(StageObjectKey(ns_, longer_keys[5], 0)));
  EXPECT_EQ(metrics_.save_bytes.load(), 5 * (ns_.spec().stage_object_bytes(0) + ns_.spec().stage_object_bytes(1)));
}

TEST_P(SaveEngineTest, ChunksAlreadyInThePoolAreSkipped) {
  auto engine = Engine();
  const auto tokens = Tokens(64 * 3);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(tokens.size())).ok());
  EXPECT_EQ(engine->Wait(1, testing::LongDeadline()).objects_put, 6u);
  // The next turn extends the prompt: only its two new chunks are written.
  const auto next = Tokens(64 * 5);
  ASSERT_TRUE(engine->Submit(2, next, Tables(next.size())).ok());
  const SaveOutcome out = engine->Wait(2, testing::LongDeadline());
  EXPECT_EQ(out.objects_put, 4u);
  EXPECT_EQ(out.objects_skipped, 6u);
  EXPECT_EQ(metrics_.save_objects_skipped.load(), 6u);
}

// A save of chunk 0 marks which namespace saved the prompt's first tokens, so an engine whose
// namespace differs (here its KV dtype) hears why it finds nothing, instead of a plain miss.
TEST_P(SaveEngineTest, ALookupUnderAnotherNamespaceSaysSoInsteadOfAPlainMiss) {
  auto engine = Engine();
  const auto tokens = Tokens(64 * 3);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(tokens.size())).ok());
  ASSERT_TRUE(engine->Wait(1, testing::LongDeadline()).status.ok());

  KvModelSpec other_spec = ns_.spec();
  other_spec.kv_dtype = "fp8_e4m3";
  const KvNamespace other = KvNamespace::Create(other_spec).value();
  ConnectorMetrics other_metrics;
  auto mismatch = FindCachedPrefix(pool_store_, other, tokens, 0, &other_metrics);
  ASSERT_TRUE(mismatch.ok()) << mismatch.status().ToString();
  EXPECT_EQ(mismatch->miss, MissReason::kKeyMismatch);
  EXPECT_EQ(mismatch->hit_chunks, 0u);
  EXPECT_EQ(mismatch->other_namespace, KvNamespace::CanonicalText(ns_.spec()));  // what the pool holds
  EXPECT_EQ(other_metrics.lookup_miss_key_mismatch.load(), 1u);
  EXPECT_EQ(other_metrics.lookup_miss_never_stored.load(), 0u);

  auto own = FindCachedPrefix(pool_store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->miss, MissReason::kNone);
  EXPECT_EQ(own->hit_chunks, 3u);
  // A prompt that begins otherwise is a plain miss in any namespace.
  auto fresh = tokens;
  fresh[0] = -7;
  auto plain = FindCachedPrefix(pool_store_, other, fresh, 0, &other_metrics);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->miss, MissReason::kNeverStored);
  EXPECT_EQ(other_metrics.lookup_miss_never_stored.load(), 1u);
}

TEST_P(SaveEngineTest, FullQueueRefusesInsteadOfBlocking) {
  testing::Gate gate;
  store_.before_put = [&] { gate.Wait(); };
  SaveOptions o;
  o.max_pending_requests = 1;
  auto engine = Engine(o);
  const auto tokens = Tokens(64);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(64)).ok());
  const Status second = engine->Submit(2, tokens, Tables(64));
  EXPECT_EQ(second.code(), StatusCode::kUnavailable) << second.ToString();
  EXPECT_EQ(metrics_.save_rejected_queue_full.load(), 1u);
  gate.Open();
  EXPECT_TRUE(engine->Wait(1, testing::LongDeadline()).status.ok());
  EXPECT_TRUE(engine->Submit(3, tokens, Tables(64)).ok());  // room again
  EXPECT_EQ(engine->Wait(3, testing::LongDeadline()).objects_skipped, 2u);
}

// A Wait whose deadline passes first gives up without ending the save: NOT_READY, and the
// save, its puts held at a gate, is still pending; it can be Polled, then Waited for to its
// outcome once the puts go on.
TEST_P(SaveEngineTest, WaitPastItsDeadlineLeavesTheSaveRunning) {
  testing::Gate gate;
  store_.before_put = [&] { gate.Wait(); };
  auto engine = Engine();
  const auto tokens = Tokens(64 * 2);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(tokens.size())).ok());
  EXPECT_EQ(engine->Wait(1, std::chrono::steady_clock::now() + std::chrono::milliseconds(10)).status.code(),
            StatusCode::kNotReady);
  EXPECT_FALSE(engine->Poll(1).has_value());  // still pending
  gate.Open();
  const SaveOutcome out = engine->Wait(1, testing::LongDeadline());
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.objects_put, 4u);  // 2 chunks x 2 stages
  EXPECT_EQ(engine->Poll(1)->status.code(), StatusCode::kNotFound);  // handed out once
}

TEST_P(SaveEngineTest, StageObjectsOfAChunkShareItsGroup) {
  auto engine = Engine();
  const auto tokens = Tokens(64 * 2);
  ASSERT_TRUE(engine->Submit(1, tokens, Tables(tokens.size())).ok());
  ASSERT_TRUE(engine->Wait(1, testing::LongDeadline()).status.ok());
  // The master evicts a group whole: removing one stage's object directly is the only way a
  // chunk loses one stage, and lookup then stops there.
  const auto keys = ChainChunkKeys(ns_, tokens);
  const std::string key = StageObjectKey(ns_, keys[1], 1);
  ASSERT_TRUE(pool_store_.Remove(std::span(&key, 1)).at(0).ok());
  auto hit = FindCachedPrefix(pool_store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->hit_chunks, 1u);
}

TEST_P(SaveEngineTest, BadBlockTableIsRefusedUpFront) {
  auto engine = Engine();
  const auto tokens = Tokens(64 * 2);
  auto tables = Tables(64);  // covers one chunk only
  EXPECT_EQ(engine->Submit(1, tokens, tables).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Poll(1)->status.code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(OverGrpc, SaveEngineTest, ::testing::Values(testing::PoolKind::kGrpc));
// The master's core in this process, no gRPC in the path: what ThreadSanitizer runs.
INSTANTIATE_TEST_SUITE_P(LocalPool, SaveEngineTest, ::testing::Values(testing::PoolKind::kLocal));

}  // namespace
}  // namespace kvpool::connector
