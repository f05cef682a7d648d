// The index a store keeps (SegmentIndex, fed from the master's journal) rebuilds the pool on a
// master that never saw it: objects, groups, pins, pending puts, removed-while-leased bytes,
// the lease horizon and exact capacity all come back (docs/architecture.md, invariant 8).
// In-process: PoolMetadata on a ManualClock, each "store" a thread pulling its journal.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "common/clock.h"
#include "master/pool_metadata.h"
#include "store/segment_index.h"

namespace kvpool::store {
namespace {

using namespace std::chrono_literals;
using master::PoolMetadata;
using master::PutOptions;
using master::PutStartItem;

constexpr uint64_t kSegment = 64 * 1024;

// Stands in for the writer's checksum of a key's value: any value the index must carry.
uint64_t ChecksumOf(std::string_view key) { return std::hash<std::string_view>()(key) | 1; }

// A store's index thread: pulls segment `id`'s journal from `pool` and applies it to `index`,
// until destroyed. Pause(true) stops confirming, as a stalled store does.
class Follower {
 public:
  Follower(SegmentIndex* index, PoolMetadata* pool, uint64_t id)
      : index_(*index), pool_(pool), id_(id), thread_([this] { Run(); }) {}
  ~Follower() {
    stop_ = true;
    thread_.join();
  }
  SegmentIndex& index() { return index_; }
  void Pause(bool paused) { paused_ = paused; }
  // Waits until the store has confirmed everything appended so far.
  bool CatchUp() {
    auto journal = pool_->FindSegment(id_)->journal();
    return journal->WaitConfirmed(journal->last_seq(), std::chrono::steady_clock::now() + 10s);
  }

 private:
  void Run() {
    uint64_t journal = 0, applied = 0;
    while (!stop_) {
      auto segment = pool_->FindSegment(id_);
      if (!segment || paused_) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      proto::PullIndexReply reply;
      segment->journal()->Pull(journal, applied, 20ms, 1000, &reply);
      if (reply.journal_id() != journal) {
        journal = reply.journal_id();
        applied = reply.first_seq() - 1;
      }
      for (int i = 0; i < reply.records_size(); ++i) {
        const uint64_t seq = reply.first_seq() + i;
        if (seq != applied + 1) continue;
        index_.Apply(reply.records(i), 0);
        applied = seq;
      }
    }
  }

  SegmentIndex& index_;
  PoolMetadata* pool_;
  uint64_t id_;
  std::atomic<bool> stop_{false}, paused_{false};
  std::thread thread_;
};

master::SegmentInfo Info(const std::string& store, uint64_t id = 0) {
  master::SegmentInfo info;
  info.id = id;
  info.store_id = store;
  info.host_id = "host";
  info.tcp_address = "127.0.0.1:1";
  info.size = kSegment;
  info.keeps_index = true;
  return info;
}

class PoolRebuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    master::PoolOptions options;
    options.default_lease_ms = 1000;
    options.max_lease_ms = 5000;
    options.index_sync_timeout_ms = 300;
    old_ = std::make_unique<PoolMetadata>(options, &clock_);
    fresh_ = std::make_unique<PoolMetadata>(options, &clock_);
  }

  uint64_t Mount(const std::string& store) {
    auto mounted = old_->MountSegment(Info(store));
    EXPECT_TRUE(mounted.ok());
    return mounted->id;
  }

  Status Put(PoolMetadata& pool, const std::string& key, uint64_t length, PutOptions options = {}) {
    PutStartItem item{key, length, "", ChecksumOf(key)};
    auto started = pool.BatchPutStart({&item, 1}, options);
    if (!started.results[0].status.ok()) return started.results[0].status;
    std::string_view k = key;
    return pool.BatchPutEnd({&k, 1})[0];
  }

  master::GetResult Get(PoolMetadata& pool, const std::string& key) {
    std::string_view k = key;
    return pool.BatchGetReplicas({&k, 1}, 0).results[0];
  }

  // Rejoins segment `id` on the fresh master with what `f` has applied.
  master::RejoinResult Rejoin(Follower& f, uint64_t id, const std::string& store) {
    proto::MountSegmentRequest request;
    f.index().Snapshot(&request);
    auto rejoined = fresh_->RejoinSegment(
        Info(store, id),
        std::span<const proto::IndexEntry* const>(request.entries().data(), request.entries_size()),
        request.lease_horizon_unix_ms());
    EXPECT_TRUE(rejoined.ok()) << rejoined.status().ToString();
    return rejoined.ok() ? *rejoined : master::RejoinResult{};
  }

  ManualClock clock_;
  std::unique_ptr<PoolMetadata> old_, fresh_;
};

TEST_F(PoolRebuildTest, EverythingTheOldMasterAnsweredComesBack) {
  const uint64_t id = Mount("store-a");
  SegmentIndex index;
  auto store = std::make_unique<Follower>(&index, old_.get(), id);

  PutOptions grouped;
  grouped.group = "session-1";
  ASSERT_TRUE(Put(*old_, "g/0", 1000, grouped).ok());
  ASSERT_TRUE(Put(*old_, "g/1", 3000, grouped).ok());
  PutOptions pinned;
  pinned.pin_ttl_ms = 600'000;
  ASSERT_TRUE(Put(*old_, "pinned", 500, pinned).ok());
  ASSERT_TRUE(Put(*old_, "plain", 64).ok());
  PutStartItem pending{"pending", 200, "", ChecksumOf("pending")};
  ASSERT_TRUE(old_->BatchPutStart({&pending, 1}, {}).results[0].status.ok());
  ASSERT_TRUE(Put(*old_, "evicted", 64).ok());
  std::string_view evicted = "evicted";
  ASSERT_TRUE(old_->BatchRemove({&evicted, 1})[0].ok());  // not leased: dropped at once
  ASSERT_TRUE(Put(*old_, "leased-then-removed", 128).ok());
  ASSERT_TRUE(Get(*old_, "leased-then-removed").status.ok());  // a reader holds it
  std::string_view removed = "leased-then-removed";
  ASSERT_TRUE(old_->BatchRemove({&removed, 1})[0].ok());
  const uint64_t used_before = old_->Stat().used_bytes;
  ASSERT_TRUE(store->CatchUp());
  // g/0, g/1, pinned, plain, pending, and the removed one whose lease still holds its bytes.
  EXPECT_EQ(index.size(), 6u);

  // The old master is gone; a fresh one takes the segment back, and the store follows it.
  auto result = Rejoin(*store, id, "store-a");
  store = std::make_unique<Follower>(&index, fresh_.get(), id);
  EXPECT_EQ(result.objects, 5u);
  EXPECT_EQ(result.held, 1u);
  EXPECT_EQ(result.skipped, 0u);
  auto stats = fresh_->Stat();
  EXPECT_EQ(stats.used_bytes, used_before);  // exact: the held bytes are still reserved
  EXPECT_EQ(stats.objects, 5u);
  EXPECT_EQ(stats.groups, 1u);

  for (const char* key : {"g/0", "g/1", "pinned", "plain"}) {
    auto got = Get(*fresh_, key);
    EXPECT_TRUE(got.status.ok()) << key << ": " << got.status.ToString();
    EXPECT_EQ(got.checksum, ChecksumOf(key)) << key << ": the writer's checksum must survive the failover";
  }
  EXPECT_EQ(Get(*fresh_, "g/1").length, 3000u);
  EXPECT_EQ(Get(*fresh_, "evicted").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(Get(*fresh_, "leased-then-removed").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(Get(*fresh_, "pending").status.code(), StatusCode::kNotReady);
  std::string_view p = "pending";
  EXPECT_TRUE(fresh_->BatchPutEnd({&p, 1})[0].ok());  // its writer ends it on the new master
  EXPECT_TRUE(Get(*fresh_, "pending").status.ok());
  EXPECT_EQ(Get(*fresh_, "pending").checksum, ChecksumOf("pending"));

  // Old leases are honoured: nothing is evictable before the old master's horizon.
  EXPECT_EQ(fresh_->EvictAtLeast(kSegment), 0u);
  clock_.AdvanceMs(60'000);
  const uint64_t ids[] = {id};
  fresh_->Heartbeat("store-a", ids);  // the store is alive all along
  fresh_->RunMaintenance();  // the held bytes are freed once the horizon is past
  EXPECT_EQ(fresh_->Stat().used_bytes, used_before - 128);
  // Then LRU as usual: the group goes whole, the pinned object last.
  fresh_->EvictAtLeast(1);
  std::string flags;  // BatchExists, not a read: a read would lease what it finds
  const std::string_view group[] = {"g/0", "g/1"};
  fresh_->BatchExists(group, &flags);
  EXPECT_EQ(flags[0], flags[1]);
  fresh_->EvictAtLeast(kSegment);
  EXPECT_EQ(fresh_->Stat().objects, 0u);
  EXPECT_EQ(fresh_->Stat().used_bytes, 0u);
}

TEST_F(PoolRebuildTest, NewPutsNeverLandOnBytesTheIndexHolds) {
  const uint64_t id = Mount("store-a");
  SegmentIndex index;
  auto store = std::make_unique<Follower>(&index, old_.get(), id);
  std::set<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(Put(*old_, key, 64 * (1 + i % 7)).ok());
    keys.insert(key);
  }
  Rejoin(*store, id, "store-a");
  store = std::make_unique<Follower>(&index, fresh_.get(), id);
  // Fill the rest; every new copy must be disjoint from every rebuilt one.
  std::vector<std::pair<uint64_t, uint64_t>> rebuilt;
  for (const auto& key : keys) {
    auto got = Get(*fresh_, key);
    ASSERT_TRUE(got.status.ok());
    rebuilt.emplace_back(got.replicas[0].offset, got.length);
  }
  for (int i = 0;; ++i) {
    const std::string key = "new" + std::to_string(i);
    PutStartItem item{key, 64};
    auto started = fresh_->BatchPutStart({&item, 1}, {});
    if (!started.results[0].status.ok()) {
      EXPECT_EQ(started.results[0].status.code(), StatusCode::kNoSpace);
      break;
    }
    const uint64_t offset = started.results[0].replicas[0].offset;
    for (const auto& [o, len] : rebuilt) EXPECT_TRUE(offset + 64 <= o || offset >= o + len);
  }
  EXPECT_LE(fresh_->Stat().used_bytes, kSegment);
}

TEST_F(PoolRebuildTest, CopiesOnTwoStoresBecomeOneObjectAndANewerPutWins) {
  const uint64_t a = Mount("store-a");
  const uint64_t b = Mount("store-b");
  SegmentIndex index_a, index_b;
  auto store_a = std::make_unique<Follower>(&index_a, old_.get(), a);
  auto store_b = std::make_unique<Follower>(&index_b, old_.get(), b);
  PutOptions two;
  two.replicas = 2;
  ASSERT_TRUE(Put(*old_, "both", 256, two).ok());
  ASSERT_TRUE(Put(*old_, "again", 64).ok());
  std::string_view again = "again";
  ASSERT_TRUE(old_->BatchRemove({&again, 1})[0].ok());
  ASSERT_TRUE(Put(*old_, "again", 128).ok());  // a newer put of the same key
  Rejoin(*store_a, a, "store-a");
  Rejoin(*store_b, b, "store-b");
  store_a = std::make_unique<Follower>(&index_a, fresh_.get(), a);
  store_b = std::make_unique<Follower>(&index_b, fresh_.get(), b);
  auto got = Get(*fresh_, "both");
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.replicas.size(), 2u);
  EXPECT_EQ(Get(*fresh_, "again").length, 128u);
  EXPECT_EQ(fresh_->Stat().objects, 2u);
}

TEST_F(PoolRebuildTest, AStoreThatDoesNotConfirmFailsThePutAndLeavesNothingVisible) {
  const uint64_t id = Mount("store-a");
  SegmentIndex index;
  Follower store(&index, old_.get(), id);
  store.Pause(true);
  PutStartItem item{"unconfirmed", 64};
  auto started = old_->BatchPutStart({&item, 1}, {});
  EXPECT_EQ(started.results[0].status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(started.results[0].replicas.empty());
  EXPECT_EQ(old_->Stat().objects, 0u);
  EXPECT_EQ(old_->Stat().used_bytes, 0u);
  store.Pause(false);
  EXPECT_TRUE(Put(*old_, "unconfirmed", 64).ok());  // the key was free again
}

// Rejoined objects enter the eviction order ranked by when their puts ended, and no pass
// looks at them before the lease horizon.
TEST_F(PoolRebuildTest, RejoinedObjectsAreEvictedInTheOrderTheirPutsEnded) {
  const int64_t wall = WallClockMs();
  proto::MountSegmentRequest request;
  uint64_t offset = 0;
  auto add = [&](const std::string& key, const std::string& group, int64_t completed_ago_ms,
                 bool complete = true) {
    auto* e = request.add_entries();
    e->set_key(key);
    e->set_group(group);
    e->set_offset(offset);
    e->set_length(64);
    e->set_put_id(100 + offset);
    e->set_put_started_unix_ms(wall - completed_ago_ms - 1);
    e->set_complete(complete);
    if (complete) e->set_completed_unix_ms(wall - completed_ago_ms);
    offset += 64;
  };
  add("newest", "", 1000);
  add("g0", "g", 1500);
  add("oldest", "", 3000);
  add("g1", "g", 2500);
  add("pending", "", 0, /*complete=*/false);
  std::span<const proto::IndexEntry* const> entries(request.entries().data(), request.entries_size());
  master::SegmentInfo info = Info("store-a", 7);
  info.keeps_index = false;  // no store follows this one; nothing waits for confirmations
  auto rejoined = fresh_->RejoinSegment(info, entries, wall + 1000);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status().ToString();
  EXPECT_EQ(rejoined->objects, 5u);
  EXPECT_EQ(fresh_->Stat().eviction_units, 3u);  // oldest, g, newest

  auto exists = [&](std::string_view key) {
    std::string flags;
    fresh_->BatchExists({&key, 1}, &flags);
    return flags[0] == 1;
  };
  EXPECT_EQ(fresh_->EvictAtLeast(1), 0u);  // leased until the horizon
  EXPECT_EQ(fresh_->Stat().eviction_units_visited, 0u);
  clock_.AdvanceMs(1001);
  EXPECT_EQ(fresh_->EvictAtLeast(1), 64u);
  EXPECT_FALSE(exists("oldest"));
  EXPECT_EQ(fresh_->EvictAtLeast(1), 128u);  // the group, as recent as g0
  EXPECT_FALSE(exists("g1"));
  EXPECT_EQ(fresh_->EvictAtLeast(1), 64u);
  EXPECT_FALSE(exists("newest"));
  EXPECT_EQ(fresh_->EvictAtLeast(1), 0u);  // a pending put is never evicted
  std::string_view pending = "pending";
  EXPECT_TRUE(fresh_->BatchPutEnd({&pending, 1})[0].ok());
  EXPECT_EQ(fresh_->EvictAtLeast(1), 64u);
}

TEST_F(PoolRebuildTest, MalformedEntriesAreSkippedAndARejoinOfAMountedIdIsRefused) {
  proto::MountSegmentRequest request;
  auto* inside = request.add_entries();
  inside->set_key("ok");
  inside->set_offset(0);
  inside->set_length(64);
  inside->set_put_id(1);
  inside->set_complete(true);
  auto* overlapping = request.add_entries();
  *overlapping = *inside;
  overlapping->set_key("overlaps");
  auto* outside = request.add_entries();
  *outside = *inside;
  outside->set_key("outside");
  outside->set_offset(kSegment);
  auto* empty_key = request.add_entries();
  *empty_key = *inside;
  empty_key->set_key("");
  empty_key->set_offset(128);
  std::span<const proto::IndexEntry* const> entries(request.entries().data(), request.entries_size());
  auto rejoined = fresh_->RejoinSegment(Info("store-a", 7), entries, 0);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status().ToString();
  EXPECT_EQ(rejoined->objects, 1u);
  EXPECT_EQ(rejoined->skipped, 3u);
  EXPECT_EQ(fresh_->RejoinSegment(Info("store-b", 7), entries, 0).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(fresh_->RejoinSegment(Info("store-b", uint64_t{1} << 50), entries, 0).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::store
