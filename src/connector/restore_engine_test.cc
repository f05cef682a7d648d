#include "connector/restore_engine.h"

#include <gtest/gtest.h>

#include <numeric>

#include "connector/save_engine.h"
#include "connector/test_pool.h"
#include "connector/test_stages.h"

namespace kvpool::connector {
namespace {

using namespace std::chrono_literals;

struct LayoutCase {
  const char* name;
  KvLayoutKind kind;
  uint32_t bytes;
  bool mapped = true;  // RestoreOptions::unpack_from_mapped_segments
  testing::PoolKind pool = testing::PoolKind::kGrpc;
};

// Saves a prompt's KV from one set of caches, then restores it into fresh caches with other
// block ids, as a second engine instance would.
class RestoreEngineTest : public ::testing::TestWithParam<LayoutCase> {
 protected:
  RestoreEngineTest() : RestoreEngineTest(5000) {}
  explicit RestoreEngineTest(uint64_t lease_ms, uint32_t parts = 1)
      : pool_(GetParam().pool, lease_ms, 64 << 20, parts),
        ns_(KvNamespace::Create(testing::SmallSpec(GetParam().kind, {2, 3}, GetParam().bytes)).value()),
        pool_store_(pool_.store()),
        store_(&pool_store_),
        saved_(ns_.spec(), 128),
        restored_(ns_.spec(), 128) {
    saved_.FillRandom(3);
  }

  std::vector<TokenId> Tokens(size_t n, TokenId first = 1) {
    std::vector<TokenId> t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
  }
  std::vector<std::vector<BlockId>> Tables(size_t tokens, uint64_t seed) {
    const size_t blocks = (tokens + 15) / 16;
    return {testing::RandomBlockTable(blocks, 128, seed), testing::RandomBlockTable(blocks, 128, seed + 1)};
  }
  void Save(const std::vector<TokenId>& tokens, const std::vector<std::vector<BlockId>>& tables) {
    auto engine = SaveEngine::Create(&pool_store_, ns_, saved_.Devices(), SaveOptions{}, nullptr);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    ASSERT_TRUE((*engine)->Submit(1, tokens, tables).ok());
    ASSERT_TRUE((*engine)->Wait(1, testing::LongDeadline()).status.ok());
  }
  std::unique_ptr<RestoreEngine> Engine(RestoreOptions o = {}) {
    o.unpack_from_mapped_segments = GetParam().mapped;
    // Windows of 2 chunks per worker, so multi-window paths run.
    o.staging_bytes_per_stage = uint64_t{2} * o.workers_per_stage * ns_.spec().stage_object_bytes(1);
    auto e = RestoreEngine::Create(&store_, ns_, restored_.Devices(), o, &metrics_);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }
  // Every token in [from, to) equal in saved and restored caches, for every stage.
  void ExpectSameKv(const std::vector<std::vector<BlockId>>& saved_tables,
                    const std::vector<std::vector<BlockId>>& restored_tables, uint64_t from, uint64_t to) {
    for (size_t s = 0; s < 2; ++s) {
      for (uint64_t t = from; t < to; ++t) {
        ASSERT_EQ(saved_.caches[s]->TokenBytes(saved_tables[s], t),
                  restored_.caches[s]->TokenBytes(restored_tables[s], t))
            << "stage " << s << " token " << t;
      }
    }
  }

  testing::EnginePool pool_;
  KvNamespace ns_;
  ChunkStore& pool_store_;
  testing::InterposedChunkStore store_;
  testing::HostStages saved_, restored_;
  ConnectorMetrics metrics_;
};

TEST_P(RestoreEngineTest, RestoresWhatWasSavedIntoOtherBlocks) {
  const auto tokens = Tokens(64 * 7 + 20);
  const auto saved_tables = Tables(tokens.size(), 10);
  Save(tokens, saved_tables);

  const auto tables = Tables(tokens.size(), 20);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(hit->hit_chunks, 7u);
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_FALSE(out.fell_back());
  EXPECT_EQ(out.end_token, 64u * 7);
  EXPECT_EQ(out.restored_tokens, 64u * 7);
  ExpectSameKv(saved_tables, tables, 0, 64 * 7);
  EXPECT_EQ(metrics_.restore_tokens.load(), 64u * 7);
  EXPECT_EQ(metrics_.restore_fallbacks.load(), 0u);
  // Same host: the mapped path unpacks every byte in place; the staged path none.
  const uint64_t all_bytes = 7 * (ns_.spec().stage_object_bytes(0) + ns_.spec().stage_object_bytes(1));
  EXPECT_EQ(metrics_.restore_bytes.load(), all_bytes);
  EXPECT_EQ(metrics_.restore_mapped_bytes.load(), GetParam().mapped ? all_bytes : 0);
  // One restore: each of the two stages timed once, no other stage.
  EXPECT_EQ(metrics_.restore_seconds.count(), 1u);
  EXPECT_EQ(metrics_.restore_stage_seconds[0].count(), 1u);
  EXPECT_EQ(metrics_.restore_stage_seconds[1].count(), 1u);
  EXPECT_EQ(metrics_.restore_stage_seconds[2].count(), 0u);
}

TEST_P(RestoreEngineTest, GpuCachedTokensAreNotRewritten) {
  const auto tokens = Tokens(64 * 3);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  restored_.FillRandom(99);
  const auto before = restored_.caches[1]->TokenBytes(tables[1], 79);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 80, nullptr);  // GPU holds 80 tokens
  ASSERT_TRUE(hit.ok());
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  EXPECT_EQ(out.restored_tokens, 64u * 3 - 80);
  EXPECT_EQ(restored_.caches[1]->TokenBytes(tables[1], 79), before);
  ExpectSameKv(tables, tables, 80, 64 * 3);
}

TEST_P(RestoreEngineTest, RemovedAfterLookupIsStillReadSafelyUnderTheLease) {
  const auto tokens = Tokens(64 * 2);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  for (const auto& k : hit->chunk_keys) {
    const std::vector<std::string> keys{StageObjectKey(ns_, k, 0), StageObjectKey(ns_, k, 1)};
    for (const Status& removed : pool_store_.Remove(keys)) ASSERT_TRUE(removed.ok());
  }
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();  // the lease kept the bytes
  ExpectSameKv(tables, tables, 0, 128);
}

TEST_P(RestoreEngineTest, FailedReadOnOneStageFallsBackFromThereAndIsCounted) {
  const auto tokens = Tokens(64 * 6);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(hit->hit_chunks, 6u);
  // Stage 1's read of chunk 3 fails (as if its store died mid-read).
  const size_t bad = hit->lookup_index(3, 1);
  store_.after_read = [bad](std::span<const size_t> indices, std::span<const client::ValueBuffer>,
                            std::vector<Result<uint64_t>>& out) {
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == bad) out[i] = Unavailable("injected: store gone");
    }
  };
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  EXPECT_EQ(out.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(out.fell_back());
  EXPECT_EQ(out.end_token, 64u * 3);  // every stage holds chunks 0-2; chunk 3 on is computed
  ExpectSameKv(tables, tables, 0, 64 * 3);
  EXPECT_EQ(metrics_.restore_fallbacks.load(), 1u);
  EXPECT_EQ(metrics_.restore_fallback_tokens.load(), 64u * 3);
}

// Bytes that went bad inside the store: the object's checksum catches them on the mapped path
// and on the staged one alike.
TEST_P(RestoreEngineTest, AnObjectCorruptInTheStoreEndsTheRestoreBeforeIt) {
  const auto tokens = Tokens(64 * 6);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(hit->hit_chunks, 6u);
  pool_.CorruptStoredValue(StageObjectKey(ns_, hit->chunk_keys[3], 1));
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  EXPECT_EQ(out.status.code(), StatusCode::kCorrupt) << out.status.ToString();
  EXPECT_EQ(out.end_token, 64u * 3);  // chunk 3 on is computed
  ExpectSameKv(tables, tables, 0, 64 * 3);
  EXPECT_EQ(metrics_.restore_corrupt_objects.load(), 1u);
  // The bad object is dropped, so the next save puts it again and the whole prefix hits.
  const std::string bad = StageObjectKey(ns_, hit->chunk_keys[3], 1);
  auto present = pool_store_.Exists(std::span(&bad, 1));
  ASSERT_TRUE(present.ok());
  EXPECT_FALSE(present->at(0));
  Save(tokens, tables);
  auto again = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hit_chunks, 6u);
}

TEST_P(RestoreEngineTest, SlowRestoreDoesNotBlockAnotherAndTimesOut) {
  const auto slow_tokens = Tokens(64 * 2, 1), fast_tokens = Tokens(64 * 2, 50000);
  const auto tables = Tables(128, 10), fast_tables = Tables(128, 30);
  Save(slow_tokens, tables);
  Save(fast_tokens, fast_tables);
  auto slow = FindCachedPrefix(store_, ns_, slow_tokens, 0, nullptr);
  auto fast = FindCachedPrefix(store_, ns_, fast_tokens, 0, nullptr);
  ASSERT_TRUE(slow.ok() && fast.ok());
  testing::Gate gate;
  const client::LookupResult* slow_lookup = slow->lookup.get();
  store_.before_read = [&](const client::LookupResult& l) {
    if (&l == slow_lookup) gate.Wait();  // the slow request's reads hang
  };
  RestoreOptions o;
  o.timeout = 1000ms;
  auto engine = Engine(o);
  ASSERT_TRUE(engine->Start(1, *slow, tables).ok());
  ASSERT_TRUE(engine->Start(2, *fast, fast_tables).ok());
  const RestoreOutcome f = engine->Wait(2, testing::LongDeadline());
  EXPECT_TRUE(f.status.ok()) << f.status.ToString();
  EXPECT_EQ(f.restored_tokens, 128u);
  const RestoreOutcome s = engine->Wait(1, testing::LongDeadline());  // bounded by the 1 s timeout
  EXPECT_EQ(s.status.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.restored_tokens, 0u);
  EXPECT_EQ(metrics_.restore_timeouts.load(), 1u);
  gate.Open();  // the hung reads finish now and must not write the cache any more
  // The late windows are done once the engine is idle: every stage has reported its share.
  engine->WaitIdle();
  for (uint32_t stage = 0; stage < ns_.spec().num_stages(); ++stage) {
    EXPECT_EQ(metrics_.restore_stage(stage).count(), 2u) << stage;
  }
  engine.reset();
}

// A Wait whose deadline passes first gives up without ending the restore: NOT_READY, and the
// restore, its reads held at a gate, is still in flight; it can be Polled, then Waited for to
// its outcome once the reads go on.
TEST_P(RestoreEngineTest, WaitPastItsDeadlineLeavesTheRestoreRunning) {
  const auto tokens = Tokens(64 * 2);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  testing::Gate gate;
  store_.before_read = [&](const client::LookupResult&) { gate.Wait(); };
  RestoreOptions o;
  o.timeout = std::chrono::minutes(10);  // its own bounded wait never runs out here
  auto engine = Engine(o);
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  EXPECT_EQ(engine->Wait(1, std::chrono::steady_clock::now() + 10ms).status.code(), StatusCode::kNotReady);
  EXPECT_FALSE(engine->Poll(1).has_value());  // still in flight
  EXPECT_EQ(engine->Start(1, *hit, tables).code(), StatusCode::kAlreadyExists);
  gate.Open();
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.restored_tokens, 128u);
  ExpectSameKv(tables, tables, 0, 128);
  EXPECT_EQ(engine->Poll(1)->status.code(), StatusCode::kNotFound);  // handed out once
}

// Eight requests in flight on one engine at once, each into blocks of its own: the stages'
// workers interleave their windows, and every request still gets exactly its own KV.
TEST_P(RestoreEngineTest, ManyRequestsInFlightEachGetTheirOwnKv) {
  constexpr uint64_t kRequests = 8, kTokens = 64 * 3, kBlocks = kTokens / 16;
  std::vector<std::vector<BlockId>> free_blocks = Tables(128 * 16, 40);  // every block, shuffled
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::vector<std::vector<BlockId>>> saved_tables, tables;
  for (uint64_t r = 0; r < kRequests; ++r) {
    prompts.push_back(Tokens(kTokens, 1 + r * 1000));
    saved_tables.push_back(Tables(kTokens, 100 + r));
    Save(prompts[r], saved_tables[r]);
    tables.emplace_back();
    for (const auto& stage_blocks : free_blocks) {
      tables[r].emplace_back(stage_blocks.begin() + r * kBlocks, stage_blocks.begin() + (r + 1) * kBlocks);
    }
  }
  auto engine = Engine();
  for (uint64_t r = 0; r < kRequests; ++r) {
    auto hit = FindCachedPrefix(store_, ns_, prompts[r], 0, nullptr);
    ASSERT_TRUE(hit.ok());
    ASSERT_EQ(hit->hit_chunks, 3u);
    ASSERT_TRUE(engine->Start(r, *hit, tables[r]).ok());
  }
  for (uint64_t r = 0; r < kRequests; ++r) {
    const RestoreOutcome out = engine->Wait(r, testing::LongDeadline());
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.restored_tokens, kTokens);
  }
  for (uint64_t r = 0; r < kRequests; ++r) ExpectSameKv(saved_tables[r], tables[r], 0, kTokens);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RestoreEngineTest,
                         ::testing::Values(LayoutCase{"mla576", KvLayoutKind::kLatent, 576},
                                           LayoutCase{"gqa_split_kv", KvLayoutKind::kSplitKv, 512},
                                           LayoutCase{"mla576_staged", KvLayoutKind::kLatent, 576, false},
                                           LayoutCase{"gqa_split_kv_staged", KvLayoutKind::kSplitKv, 512, false}),
                         [](const auto& info) { return std::string(info.param.name); });
// The same against the master's core in this process, with no gRPC in the path: what
// ThreadSanitizer runs (scripts/test.sh leaves out every suite over gRPC).
INSTANTIATE_TEST_SUITE_P(
    LocalPool, RestoreEngineTest,
    ::testing::Values(LayoutCase{"mla576", KvLayoutKind::kLatent, 576, true, testing::PoolKind::kLocal},
                      LayoutCase{"gqa_split_kv_staged", KvLayoutKind::kSplitKv, 512, false, testing::PoolKind::kLocal}),
    [](const auto& info) { return std::string(info.param.name); });

// Leases of 300 ms: a restore started after its lease ended must not read, and falls back.
class ShortLeaseRestoreTest : public RestoreEngineTest {
 protected:
  ShortLeaseRestoreTest() : RestoreEngineTest(300) {}
};

TEST_P(ShortLeaseRestoreTest, ExpiredLeaseFallsBack) {
  const auto tokens = Tokens(64 * 2);
  const auto tables = Tables(tokens.size(), 10);
  Save(tokens, tables);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, nullptr);
  ASSERT_TRUE(hit.ok());
  std::this_thread::sleep_until(hit->lease_deadline() + 50ms);
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  EXPECT_EQ(out.status.code(), StatusCode::kTimeout) << out.status.ToString();
  EXPECT_EQ(out.restored_tokens, 0u);
  EXPECT_EQ(metrics_.restore_fallbacks.load(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ShortLeaseRestoreTest,
                         ::testing::Values(LayoutCase{"mla576", KvLayoutKind::kLatent, 576}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(LocalPool, ShortLeaseRestoreTest,
                         ::testing::Values(LayoutCase{"mla576", KvLayoutKind::kLatent, 576, true,
                                                      testing::PoolKind::kLocal}),
                         [](const auto& info) { return std::string(info.param.name); });

// The published pool: each stage in its own part (own master, own store).
class PartsRestoreTest : public RestoreEngineTest {
 protected:
  PartsRestoreTest() : RestoreEngineTest(5000, 2) {}
};

TEST_P(PartsRestoreTest, EachStageSavesToAndRestoresFromItsOwnPart) {
  const auto tokens = Tokens(64 * 7 + 20);
  const auto saved_tables = Tables(tokens.size(), 10);
  Save(tokens, saved_tables);
  auto stats = pool_.grpc()->client().Stat();
  ASSERT_TRUE(stats.ok());
  // Each stage's 7 objects in its own part, and in one of them the first tokens' marker
  // (first_tokens_marker.h: stage 0 put chunk 0), wherever its key hashes.
  EXPECT_EQ(stats->parts[0].objects + stats->parts[1].objects, 7u * 2 + 1);
  EXPECT_GE(stats->parts[0].objects, 7u);
  EXPECT_GE(stats->parts[1].objects, 7u);

  const auto tables = Tables(tokens.size(), 20);
  auto hit = FindCachedPrefix(store_, ns_, tokens, 0, &metrics_);
  ASSERT_TRUE(hit.ok());
  ASSERT_EQ(hit->hit_chunks, 7u);
  auto engine = Engine();
  ASSERT_TRUE(engine->Start(1, *hit, tables).ok());
  const RestoreOutcome out = engine->Wait(1, testing::LongDeadline());
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.restored_tokens, 64u * 7);
  ExpectSameKv(saved_tables, tables, 0, 64 * 7);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PartsRestoreTest,
                         ::testing::Values(LayoutCase{"mla576", KvLayoutKind::kLatent, 576},
                                           LayoutCase{"gqa_split_kv_staged", KvLayoutKind::kSplitKv, 512, false}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvpool::connector
