#include "master/pool_metadata.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

namespace kvpool::master {
namespace {

constexpr uint64_t kObject = 64;  // one allocation unit, so sizes add up exactly

class PoolMetadataTest : public ::testing::Test {
 protected:
  void MakePool(PoolOptions options = {}) { pool_ = std::make_unique<PoolMetadata>(options, &clock_); }

  uint64_t Mount(uint64_t size, const std::string& store = "store-a") {
    SegmentInfo info;
    info.store_id = store;
    info.host_id = "host";
    info.tcp_address = "127.0.0.1:1";
    info.size = size;
    auto mounted = pool_->MountSegment(info);
    EXPECT_TRUE(mounted.ok()) << mounted.status().ToString();
    return mounted->id;
  }

  PutStartResult PutStart(const std::string& key, uint64_t length, const PutOptions& options = {}) {
    PutStartItem item{key, length};
    auto out = pool_->BatchPutStart({&item, 1}, options);
    return out.results[0];
  }

  Status PutEnd(const std::string& key) {
    std::string_view k = key;
    return pool_->BatchPutEnd({&k, 1})[0];
  }

  // PutStart + PutEnd; returns the first error.
  Status Put(const std::string& key, uint64_t length = kObject, const PutOptions& options = {}) {
    auto started = PutStart(key, length, options);
    if (!started.status.ok()) return started.status;
    return PutEnd(key);
  }

  GetResult Get(const std::string& key, uint64_t lease_ms = 0) {
    std::string_view k = key;
    return pool_->BatchGetReplicas({&k, 1}, lease_ms).results[0];
  }

  bool Exists(const std::string& key) {
    std::string_view k = key;
    std::string flags;
    pool_->BatchExists({&k, 1}, &flags);
    return flags.at(0) == 1;
  }

  Status Remove(const std::string& key) {
    std::string_view k = key;
    return pool_->BatchRemove({&k, 1})[0];
  }

  uint64_t Used() { return pool_->Stat().used_bytes; }

  ManualClock clock_;
  std::unique_ptr<PoolMetadata> pool_;
};

// ---- namespace quotas ----

TEST(NamespaceOfTest, IsWhatComesBeforeTheFirstSlash) {
  EXPECT_EQ(NamespaceOf("model-a/chunk/s0"), "model-a");
  EXPECT_EQ(NamespaceOf("plain-key"), "");
  EXPECT_EQ(NamespaceOf("/leading"), "");
  EXPECT_EQ(NamespaceOf(""), "");
}

uint64_t UsedBy(const PoolStats& stats, const std::string& ns) {
  for (const NamespaceUsage& n : stats.namespaces) {
    if (n.name == ns) return n.used_bytes;
  }
  return 0;
}

// A namespace at its quota makes room by evicting its own least recently used objects; the
// others' objects stay, though the pool itself has room to spare.
TEST_F(PoolMetadataTest, ANamespaceAtItsQuotaEvictsItsOwnObjectsNeverAnothers) {
  PoolOptions o;
  o.quotas.bytes = {{"a", 8 * kObject}, {"b", 8 * kObject}};
  MakePool(o);
  Mount(64 * kObject);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Put("b/" + std::to_string(i)).ok());
  for (int i = 0; i < 50; ++i) {
    clock_.AdvanceMs(1);  // one recency per object
    ASSERT_TRUE(Put("a/" + std::to_string(i)).ok()) << i;
    ASSERT_LE(UsedBy(pool_->Stat(), "a"), 8 * kObject);
  }
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(Exists("b/" + std::to_string(i))) << i;
  for (int i = 42; i < 50; ++i) EXPECT_TRUE(Exists("a/" + std::to_string(i))) << i;  // the newest stay
  EXPECT_FALSE(Exists("a/0"));
  EXPECT_EQ(UsedBy(pool_->Stat(), "a"), 8 * kObject);
  ASSERT_TRUE(Remove("a/49").ok());
  EXPECT_EQ(UsedBy(pool_->Stat(), "a"), 7 * kObject);  // what an object charged goes back when it goes
}

// Many threads put into two namespaces with quotas beside a third without one: no namespace
// ever holds more than its quota, the pool never more than its capacity, and the third
// namespace loses nothing.
TEST_F(PoolMetadataTest, QuotasHoldUnderAPutStorm) {
  PoolOptions o;
  o.quotas.bytes = {{"a", 16 * kObject}, {"b", 16 * kObject}};
  MakePool(o);
  Mount(64 * kObject, "store-a");
  Mount(64 * kObject, "store-b");
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(Put("c/" + std::to_string(i)).ok());
  std::atomic<bool> done{false};
  std::atomic<int> over_quota{0}, over_capacity{0}, other_errors{0};
  std::thread monitor([&] {
    while (!done.load()) {
      const PoolStats stats = pool_->Stat();
      if (UsedBy(stats, "a") > 16 * kObject || UsedBy(stats, "b") > 16 * kObject) ++over_quota;
      if (stats.used_bytes > stats.capacity_bytes) ++over_capacity;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      const std::string ns = t % 2 == 0 ? "a/" : "b/";
      for (int i = 0; i < 300; ++i) {
        const Status s = Put(ns + std::to_string(t) + "-" + std::to_string(i), kObject * (1 + i % 3));
        if (!s.ok() && s.code() != StatusCode::kNoSpace) ++other_errors;
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  monitor.join();
  EXPECT_EQ(over_quota.load(), 0);
  EXPECT_EQ(over_capacity.load(), 0);
  EXPECT_EQ(other_errors.load(), 0);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(Exists("c/" + std::to_string(i))) << i;
  const PoolStats stats = pool_->Stat();
  EXPECT_GT(UsedBy(stats, "a"), 0u);
  EXPECT_GT(UsedBy(stats, "b"), 0u);
}

TEST_F(PoolMetadataTest, AQuotaThatCannotMakeRoomIsNoSpaceAndSaysWhy) {
  PoolOptions o;
  o.quotas.default_bytes = 4 * kObject;
  MakePool(o);
  Mount(64 * kObject);
  EXPECT_EQ(PutStart("m/huge", 5 * kObject).status.code(), StatusCode::kNoSpace);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Put("m/" + std::to_string(i)).ok());
    ASSERT_TRUE(Get("m/" + std::to_string(i), 1000).status.ok());  // leased: cannot be evicted
  }
  const Status full = Put("m/next");
  EXPECT_EQ(full.code(), StatusCode::kNoSpace);
  EXPECT_NE(full.message().find("quota"), std::string::npos) << full.ToString();
  EXPECT_TRUE(Put("n/other").ok());  // another namespace has its own quota
  clock_.AdvanceMs(1001);
  EXPECT_TRUE(Put("m/next").ok());  // the leases ended: its oldest object made room
}

TEST_F(PoolMetadataTest, WithQuotasAGroupHoldsOneNamespacesObjects) {
  PoolOptions o;
  o.quotas.bytes = {{"a", 8 * kObject}};
  MakePool(o);
  Mount(64 * kObject);
  PutOptions other;
  other.group = "b/group";
  EXPECT_EQ(PutStart("a/key", kObject, other).status.code(), StatusCode::kInvalidArgument);
  PutOptions own;
  own.group = "a/group";
  EXPECT_TRUE(Put("a/key", kObject, own).ok());
  EXPECT_TRUE(Put("c/key", kObject, other).ok());  // neither namespace has a quota
}

// ---- checksums ----

// The writer's checksum is kept with the object and handed to every reader (the store's index
// carries it too: pool_rebuild_test).
TEST_F(PoolMetadataTest, TheWritersChecksumGoesToEveryReader) {
  MakePool();
  Mount(1 << 20);
  PutStartItem item{"k", kObject, "", 0x1234567890ABCDEF};
  ASSERT_TRUE(pool_->BatchPutStart({&item, 1}, {}).results[0].status.ok());
  ASSERT_TRUE(PutEnd("k").ok());
  const GetResult got = Get("k");
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.checksum, 0x1234567890ABCDEFu);
}

// ---- validation ----

TEST_F(PoolMetadataTest, RejectsInvalidPuts) {
  PoolOptions options;
  options.max_key_bytes = 8;
  options.max_value_bytes = 1000;
  MakePool(options);
  Mount(1 << 20);
  EXPECT_EQ(PutStart("", 10).status.code(), StatusCode::kInvalidArgument);
  auto too_long = PutStart("123456789", 10).status;
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("max_key_bytes"), std::string::npos) << too_long.message();
  EXPECT_EQ(PutStart("k", 0).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PutStart("k", 1001).status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Put("k", 1000).ok());
  EXPECT_EQ(PutStart("k", 10).status.code(), StatusCode::kAlreadyExists);
}

TEST_F(PoolMetadataTest, DuplicateKeyInOneBatch) {
  MakePool();
  Mount(1 << 20);
  std::string a = "same";
  PutStartItem items[] = {{a, 10}, {a, 10}};
  auto out = pool_->BatchPutStart(items, {});
  EXPECT_TRUE(out.results[0].status.ok());
  EXPECT_EQ(out.results[1].status.code(), StatusCode::kAlreadyExists);
}

TEST_F(PoolMetadataTest, NoSegmentsIsUnavailable) {
  MakePool();
  EXPECT_EQ(PutStart("k", 10).status.code(), StatusCode::kUnavailable);
}

TEST_F(PoolMetadataTest, ValueLargerThanEverySegmentIsNoSpace) {
  MakePool();
  Mount(4096);
  Mount(8192);
  auto status = PutStart("big", 8193).status;
  EXPECT_EQ(status.code(), StatusCode::kNoSpace);
  EXPECT_NE(status.message().find("larger than every segment"), std::string::npos)
      << status.message();
  EXPECT_TRUE(Put("fits", 8192).ok());
}

// ---- placement ----

TEST_F(PoolMetadataTest, ReplicasLandOnDistinctSegments) {
  MakePool();
  for (int i = 0; i < 3; ++i) Mount(1 << 20, "store-" + std::to_string(i));
  PutOptions three;
  three.replicas = 3;
  for (int i = 0; i < 50; ++i) {
    auto started = PutStart("k" + std::to_string(i), 1000, three);
    ASSERT_TRUE(started.status.ok()) << started.status.ToString();
    ASSERT_EQ(started.replicas.size(), 3u);
    std::set<uint64_t> segments;
    for (const auto& r : started.replicas) segments.insert(r.segment_id);
    EXPECT_EQ(segments.size(), 3u);
  }
  PutOptions four;
  four.replicas = 4;
  EXPECT_EQ(PutStart("four", 1000, four).status.code(), StatusCode::kNoSpace);
}

TEST_F(PoolMetadataTest, PlacementBalancesSegments) {
  MakePool();
  for (int i = 0; i < 4; ++i) Mount(1 << 20, "store-" + std::to_string(i));
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(Put("k" + std::to_string(i), 1024).ok());
  for (const auto& segment : pool_->Stat().segments) {
    // Power of two choices keeps each segment close to the mean of 100 objects.
    EXPECT_GE(segment.objects, 80u) << "segment " << segment.info.id;
    EXPECT_LE(segment.objects, 120u) << "segment " << segment.info.id;
  }
}

TEST_F(PoolMetadataTest, BatchRepliesNameReferencedSegments) {
  MakePool();
  uint64_t a = Mount(1 << 20, "store-a");
  uint64_t b = Mount(1 << 20, "store-b");
  PutStartItem items[] = {{"x", 10}, {"y", 10}};
  PutOptions two;
  two.replicas = 2;
  auto started = pool_->BatchPutStart(items, two);
  std::set<uint64_t> ids;
  for (const auto& s : started.segments) ids.insert(s.id);
  EXPECT_EQ(ids, (std::set<uint64_t>{a, b}));
  ASSERT_TRUE(PutEnd("x").ok());
  std::string_view key = "x";
  auto got = pool_->BatchGetReplicas({&key, 1}, 0);
  ASSERT_EQ(got.segments.size(), 2u);
  EXPECT_EQ(got.segments[0].store_id.substr(0, 6), "store-");
}

// ---- two-phase put ----

TEST_F(PoolMetadataTest, ObjectVisibleOnlyAfterPutEnd) {
  MakePool();
  Mount(1 << 20);
  auto started = PutStart("k", 100);
  ASSERT_TRUE(started.status.ok());
  ASSERT_EQ(started.replicas.size(), 1u);
  EXPECT_EQ(started.replicas[0].length, 100u);
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(Get("k").status.code(), StatusCode::kNotReady);
  EXPECT_EQ(Remove("k").code(), StatusCode::kNotReady);
  ASSERT_TRUE(PutEnd("k").ok());
  EXPECT_TRUE(Exists("k"));
  auto got = Get("k");
  ASSERT_TRUE(got.status.ok());
  EXPECT_EQ(got.length, 100u);
  ASSERT_EQ(got.replicas.size(), 1u);
  EXPECT_EQ(got.replicas[0].offset, started.replicas[0].offset);
  EXPECT_EQ(PutEnd("k").code(), StatusCode::kAlreadyExists);
}

TEST_F(PoolMetadataTest, RevokeFreesSpace) {
  MakePool();
  Mount(1 << 20);
  ASSERT_TRUE(PutStart("k", 1000).status.ok());
  EXPECT_GT(Used(), 0u);
  std::string_view key = "k";
  EXPECT_TRUE(pool_->BatchPutRevoke({&key, 1})[0].ok());
  EXPECT_EQ(Used(), 0u);
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(PutEnd("k").code(), StatusCode::kNotFound);
  ASSERT_TRUE(Put("k", 1000).ok());
  EXPECT_EQ(pool_->BatchPutRevoke({&key, 1})[0].code(), StatusCode::kAlreadyExists);
}

TEST_F(PoolMetadataTest, SweeperReclaimsTimedOutPuts) {
  PoolOptions options;
  options.put_timeout_ms = 30000;
  options.heartbeat_ttl_ms = 3600 * 1000;  // the store stays mounted through the long waits
  MakePool(options);
  Mount(1 << 20);
  ASSERT_TRUE(PutStart("slow", 1000).status.ok());
  clock_.AdvanceMs(10000);
  ASSERT_TRUE(PutStart("fresh", 1000).status.ok());
  clock_.AdvanceMs(19999);
  pool_->RunMaintenance();
  EXPECT_EQ(pool_->Stat().objects, 2u);  // not yet
  clock_.AdvanceMs(1);
  pool_->RunMaintenance();
  EXPECT_EQ(pool_->Stat().objects, 1u);
  EXPECT_EQ(PutEnd("slow").code(), StatusCode::kNotFound);
  EXPECT_TRUE(PutEnd("fresh").ok());
  EXPECT_EQ(Used(), 1024u);
}

TEST_F(PoolMetadataTest, LatePutEndTimesOutEvenBeforeSweep) {
  MakePool();
  Mount(1 << 20);
  ASSERT_TRUE(PutStart("k", 1000).status.ok());
  clock_.AdvanceMs(30000);
  EXPECT_EQ(PutEnd("k").code(), StatusCode::kTimeout);
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(Used(), 0u);
}

// ---- leases ----

TEST_F(PoolMetadataTest, LeaseGrantedIsCapped) {
  PoolOptions options;
  options.default_lease_ms = 5000;
  options.max_lease_ms = 60000;
  MakePool(options);
  Mount(1 << 20);
  ASSERT_TRUE(Put("k").ok());
  std::string_view key = "k";
  EXPECT_EQ(pool_->BatchGetReplicas({&key, 1}, 0).lease_ms, 5000u);
  EXPECT_EQ(pool_->BatchGetReplicas({&key, 1}, 1000).lease_ms, 1000u);
  EXPECT_EQ(pool_->BatchGetReplicas({&key, 1}, 999999).lease_ms, 60000u);
}

TEST_F(PoolMetadataTest, LeaseBlocksEvictionUntilItEnds) {
  MakePool();
  Mount(kObject * 4);
  ASSERT_TRUE(Put("a").ok());
  ASSERT_TRUE(Put("b").ok());
  ASSERT_TRUE(Get("a", 5000).status.ok());
  pool_->EvictAtLeast(kObject * 4);
  EXPECT_TRUE(Exists("a"));
  EXPECT_FALSE(Exists("b"));
  clock_.AdvanceMs(4999);
  pool_->EvictAtLeast(kObject * 4);
  EXPECT_TRUE(Exists("a"));
  clock_.AdvanceMs(1);
  pool_->EvictAtLeast(kObject * 4);
  EXPECT_FALSE(Exists("a"));
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(pool_->Stat().evicted_objects, 2u);
}

TEST_F(PoolMetadataTest, RemoveOfLeasedObjectHidesNowFreesLater) {
  PoolOptions options;
  options.heartbeat_ttl_ms = 3600 * 1000;
  MakePool(options);
  Mount(1 << 20);
  ASSERT_TRUE(Put("k", 1000).ok());
  ASSERT_TRUE(Get("k", 5000).status.ok());
  ASSERT_TRUE(Remove("k").ok());
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(Get("k").status.code(), StatusCode::kNotFound);
  EXPECT_EQ(Used(), 1024u);  // bytes still being read
  // The key is free for a new object at once; its space is separate.
  ASSERT_TRUE(Put("k", 1000).ok());
  EXPECT_EQ(Used(), 2048u);
  clock_.AdvanceMs(4999);
  pool_->RunMaintenance();
  EXPECT_EQ(Used(), 2048u);
  clock_.AdvanceMs(1);
  pool_->RunMaintenance();
  EXPECT_EQ(Used(), 1024u);
  EXPECT_TRUE(Exists("k"));
}

TEST_F(PoolMetadataTest, RemoveUnleasedFreesAtOnce) {
  MakePool();
  Mount(1 << 20);
  ASSERT_TRUE(Put("k", 1000).ok());
  ASSERT_TRUE(Remove("k").ok());
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(Remove("k").code(), StatusCode::kNotFound);
}

TEST_F(PoolMetadataTest, HitsAndMissesCounted) {
  MakePool();
  Mount(1 << 20);
  ASSERT_TRUE(Put("k").ok());
  Get("k");
  Get("k");
  Get("nope");
  auto stats = pool_->Stat();
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.misses, 1u);
}

TEST_F(PoolMetadataTest, HitsAndMissesCountedPerNamespaceWithinABound) {
  MakePool();
  Mount(1 << 20);
  ASSERT_TRUE(Put("model-a/k").ok());
  Get("model-a/k");
  Get("model-a/gone");
  Get("model-b/gone");
  Get("");  // an invalid key: counted by neither
  auto counts = pool_->Stat().namespace_hits;
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].name, "model-a");
  EXPECT_EQ(counts[0].hits, 1u);
  EXPECT_EQ(counts[0].misses, 1u);
  EXPECT_EQ(counts[1].name, "model-b");
  EXPECT_EQ(counts[1].misses, 1u);
  // Namespaces past the bound all count under one name: a client cannot grow the master.
  for (size_t i = 0; i < 2 * NamespaceHits::kMaxNamespaces; ++i) Get("ns" + std::to_string(i) + "/x");
  counts = pool_->Stat().namespace_hits;
  EXPECT_EQ(counts.size(), NamespaceHits::kMaxNamespaces + 1);
  const auto other = std::find_if(counts.begin(), counts.end(),
                                  [](const NamespaceHitCount& c) { return c.name == NamespaceHits::kOther; });
  ASSERT_NE(other, counts.end());
  EXPECT_EQ(other->misses, 2 * NamespaceHits::kMaxNamespaces - (NamespaceHits::kMaxNamespaces - 2));
}

// ---- eviction ----

TEST_F(PoolMetadataTest, EvictsLeastRecentlyUsedFirst) {
  MakePool();
  Mount(kObject * 8);
  for (const char* key : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(Put(key).ok());
    clock_.AdvanceMs(10);
  }
  ASSERT_TRUE(Get("a", 1).status.ok());  // a becomes most recent
  clock_.AdvanceMs(10);
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("b"));
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 2), kObject * 2);
  EXPECT_FALSE(Exists("c"));
  EXPECT_FALSE(Exists("d"));
  EXPECT_TRUE(Exists("a"));
}

TEST_F(PoolMetadataTest, FailedAllocationEvictsSynchronously) {
  PoolOptions options;
  options.evict_fraction = 0.25;
  MakePool(options);
  Mount(kObject * 4);
  for (const char* key : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(Put(key).ok());
    clock_.AdvanceMs(10);
  }
  ASSERT_TRUE(Put("e").ok());
  EXPECT_FALSE(Exists("a"));
  EXPECT_TRUE(Exists("b"));
  EXPECT_TRUE(Exists("e"));
  EXPECT_LE(Used(), kObject * 4);
}

TEST_F(PoolMetadataTest, FailedAllocationEvictsAtLeastWhatItNeeds) {
  PoolOptions options;
  options.evict_fraction = 0.01;
  MakePool(options);
  Mount(kObject * 4);
  for (const char* key : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(Put(key).ok());
    clock_.AdvanceMs(10);
  }
  ASSERT_TRUE(Put("big", kObject * 3).ok());
  EXPECT_TRUE(Exists("d"));
  EXPECT_EQ(Used(), kObject * 4);
}

TEST_F(PoolMetadataTest, NoSpaceWhenNothingIsEvictable) {
  MakePool();
  Mount(kObject * 4);
  for (const char* key : {"a", "b"}) ASSERT_TRUE(Put(key).ok());
  for (const char* key : {"a", "b"}) ASSERT_TRUE(Get(key, 10000).status.ok());
  ASSERT_TRUE(PutStart("pending", kObject * 2).status.ok());
  auto status = Put("c");
  EXPECT_EQ(status.code(), StatusCode::kNoSpace) << status.ToString();
  EXPECT_EQ(Used(), kObject * 4);
  EXPECT_FALSE(Exists("c"));
  EXPECT_EQ(Get("c").status.code(), StatusCode::kNotFound);  // failed put left no trace
  clock_.AdvanceMs(10000);
  EXPECT_TRUE(Put("c").ok());
}

TEST_F(PoolMetadataTest, WatermarkTriggersBackgroundEviction) {
  PoolOptions options;
  options.high_watermark = 0.9;
  options.evict_fraction = 0.05;
  MakePool(options);
  Mount(kObject * 100);
  for (int i = 0; i < 90; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i)).ok());
    clock_.AdvanceMs(1);
  }
  pool_->RunMaintenance();
  EXPECT_EQ(pool_->Stat().objects, 90u);  // at, not above, the watermark
  ASSERT_TRUE(Put("k90").ok());
  pool_->RunMaintenance();
  EXPECT_EQ(pool_->Stat().objects, 86u);  // 5% of 100 slots
  EXPECT_FALSE(Exists("k0"));
  EXPECT_FALSE(Exists("k4"));
  EXPECT_TRUE(Exists("k5"));
}

TEST_F(PoolMetadataTest, GroupsAreEvictedWhole) {
  MakePool();
  Mount(kObject * 16);
  PutOptions chunk;
  chunk.group = "chunk-1";
  ASSERT_TRUE(Put("old-single").ok());
  clock_.AdvanceMs(10);
  for (const char* key : {"stage-0", "stage-1", "stage-2"}) ASSERT_TRUE(Put(key, kObject, chunk).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("new-single").ok());
  clock_.AdvanceMs(10);
  // stage-1 was read recently; the group's recency is its most recent member.
  ASSERT_TRUE(Get("stage-1", 1).status.ok());
  clock_.AdvanceMs(10);

  EXPECT_EQ(pool_->EvictAtLeast(1), kObject);
  EXPECT_FALSE(Exists("old-single"));
  EXPECT_EQ(pool_->EvictAtLeast(1), kObject);
  EXPECT_FALSE(Exists("new-single"));
  // Asking for one byte takes the whole group.
  EXPECT_EQ(pool_->EvictAtLeast(1), kObject * 3);
  for (const char* key : {"stage-0", "stage-1", "stage-2"}) EXPECT_FALSE(Exists(key)) << key;
  EXPECT_EQ(pool_->Stat().groups, 0u);
}

TEST_F(PoolMetadataTest, ItemGroupsSplitOneBatchIntoSeveralEvictionGroups) {
  MakePool();
  Mount(kObject * 16);
  PutOptions batch;
  batch.group = "batch";
  PutStartItem items[] = {{"a0", kObject, "chunk-a"}, {"a1", kObject, "chunk-a"}, {"b0", kObject, "chunk-b"},
                          {"c0", kObject, ""}};
  for (const auto& r : pool_->BatchPutStart(items, batch).results) ASSERT_TRUE(r.status.ok());
  for (const char* key : {"a0", "a1", "b0", "c0"}) ASSERT_TRUE(PutEnd(key).ok());
  EXPECT_EQ(pool_->Stat().groups, 3u);  // chunk-a, chunk-b, and "batch" for the item without one
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Get("b0").status.ok());  // leased: not evictable now
  ASSERT_TRUE(Get("c0").status.ok());
  EXPECT_EQ(pool_->EvictAtLeast(1), kObject * 2);  // chunk-a goes whole
  EXPECT_FALSE(Exists("a0"));
  EXPECT_FALSE(Exists("a1"));
  EXPECT_TRUE(Exists("b0"));
}

TEST_F(PoolMetadataTest, GroupWithLeasedMemberIsSkippedWhole) {
  MakePool();
  Mount(kObject * 16);
  PutOptions chunk;
  chunk.group = "g";
  for (const char* key : {"g0", "g1", "g2"}) ASSERT_TRUE(Put(key, kObject, chunk).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("single").ok());
  ASSERT_TRUE(Get("g2", 5000).status.ok());
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 16), kObject);
  for (const char* key : {"g0", "g1", "g2"}) EXPECT_TRUE(Exists(key)) << key;
  EXPECT_FALSE(Exists("single"));
  clock_.AdvanceMs(5000);
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 16), kObject * 3);
}

TEST_F(PoolMetadataTest, GroupWithPendingMemberIsSkippedWhole) {
  MakePool();
  Mount(kObject * 16);
  PutOptions chunk;
  chunk.group = "g";
  ASSERT_TRUE(Put("g0", kObject, chunk).ok());
  ASSERT_TRUE(PutStart("g1", kObject, chunk).status.ok());
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 16), 0u);
  EXPECT_TRUE(Exists("g0"));
  ASSERT_TRUE(PutEnd("g1").ok());
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 16), kObject * 2);
}

TEST_F(PoolMetadataTest, GroupsSurviveDroppingOneMemberByRemove) {
  MakePool();
  Mount(kObject * 16);
  PutOptions chunk;
  chunk.group = "g";
  for (const char* key : {"g0", "g1"}) ASSERT_TRUE(Put(key, kObject, chunk).ok());
  ASSERT_TRUE(Remove("g0").ok());
  ASSERT_TRUE(Put("g0", kObject, chunk).ok());  // re-put under the same group
  EXPECT_EQ(pool_->EvictAtLeast(1), kObject * 2);
  EXPECT_FALSE(Exists("g0"));
  EXPECT_FALSE(Exists("g1"));
}

TEST_F(PoolMetadataTest, PinnedObjectsGoLast) {
  MakePool();
  Mount(kObject * 16);
  PutOptions pinned;
  pinned.pin_ttl_ms = 60000;
  ASSERT_TRUE(Put("pinned-oldest", kObject, pinned).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("a").ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("b").ok());
  clock_.AdvanceMs(10);
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 2), kObject * 2);
  EXPECT_TRUE(Exists("pinned-oldest"));
  // With no unpinned candidate left, a soft pin yields.
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("pinned-oldest"));
}

// A router's hints (issue 18): a retained key outlives less recent ones until its retention
// ends; a released one goes first; at most max_retained_fraction of the units are retained.
TEST_F(PoolMetadataTest, RetainedKeysOutliveOthersAndReleasedOnesGoFirst) {
  MakePool();
  Mount(kObject * 16);
  for (const char* key : {"waiting", "a", "b", "c", "ended"}) {
    ASSERT_TRUE(Put(key).ok());
    clock_.AdvanceMs(10);
  }
  const std::vector<std::string_view> waiting = {"waiting"}, ended = {"ended"};
  ASSERT_TRUE(pool_->BatchRetain(waiting, 1000, 1000)[0].ok());
  ASSERT_TRUE(pool_->BatchRetain(ended, 0, 0)[0].ok());
  EXPECT_EQ(pool_->Stat().retained_units, 1u);
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 2), kObject * 2);
  EXPECT_FALSE(Exists("ended"));  // released: first, though the most recent
  EXPECT_FALSE(Exists("a"));
  EXPECT_TRUE(Exists("waiting"));  // retained: though the least recent
  clock_.AdvanceMs(1000);          // its retention ends: plain LRU again
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("waiting"));
  EXPECT_EQ(pool_->Stat().retained_units, 0u);

  const std::vector<std::string_view> all = {"b", "c", "absent"};
  const std::vector<Status> out = pool_->BatchRetain(all, 1000, 900);  // 2 units: at most 1 retained
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(out[1].code(), StatusCode::kNoSpace) << out[1].ToString();
  EXPECT_EQ(out[2].code(), StatusCode::kNotFound);
  // Expected sooner than "b", "c" takes its place: "b" is plain LRU again, and goes first.
  const std::vector<std::string_view> c = {"c"};
  ASSERT_TRUE(pool_->BatchRetain(c, 1000, 100)[0].ok());
  EXPECT_EQ(pool_->Stat().retained_units, 1u);
  EXPECT_EQ(pool_->Stat().displaced_retentions, 1u);
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("b"));
  EXPECT_TRUE(Exists("c"));
  // A retention longer than a day is a mistake (or a malformed call), refused whole.
  EXPECT_EQ(pool_->BatchRetain(c, UINT64_MAX, 0)[0].code(), StatusCode::kInvalidArgument);
}

TEST_F(PoolMetadataTest, ExpiredPinIsPlainLru) {
  MakePool();
  Mount(kObject * 16);
  PutOptions pinned;
  pinned.pin_ttl_ms = 100;
  ASSERT_TRUE(Put("was-pinned", kObject, pinned).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("a").ok());
  clock_.AdvanceMs(100);
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("was-pinned"));
  EXPECT_TRUE(Exists("a"));
}

TEST_F(PoolMetadataTest, GroupWhosePinnedMemberWasRemovedIsNoLongerPinned) {
  MakePool();
  Mount(kObject * 16);
  PutOptions pinned;
  pinned.group = "g";
  pinned.pin_ttl_ms = 60000;
  PutOptions plain;
  plain.group = "g";
  ASSERT_TRUE(Put("g-pinned", kObject, pinned).ok());
  ASSERT_TRUE(Put("g-plain", kObject, plain).ok());
  clock_.AdvanceMs(10);
  ASSERT_TRUE(Put("newer").ok());
  ASSERT_TRUE(Remove("g-pinned").ok());
  EXPECT_EQ(pool_->EvictAtLeast(1), kObject);
  EXPECT_FALSE(Exists("g-plain"));  // older than "newer", and no longer pinned
  EXPECT_TRUE(Exists("newer"));
}

// The eviction order is kept as objects come and go, so a pass looks at about as many units
// as it evicts, whatever the pool holds (no timing here: the pass counts what it looked at).
TEST_F(PoolMetadataTest, EvictionPassLooksAtWhatItEvictsNotAtThePool) {
  MakePool();
  Mount(kObject * 20000);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i)).ok());
    if (i % 100 == 99) clock_.AdvanceMs(1);
  }
  EXPECT_EQ(pool_->Stat().eviction_units, 10000u);
  for (uint64_t k : {1u, 10u, 100u}) {
    const uint64_t before = pool_->Stat().eviction_units_visited;
    EXPECT_EQ(pool_->EvictAtLeast(kObject * k), kObject * k);
    const uint64_t visited = pool_->Stat().eviction_units_visited - before;
    EXPECT_GE(visited, k);
    EXPECT_LE(visited, 2 * k) << "evicting " << k << " units";
  }
  EXPECT_EQ(pool_->Stat().objects, 10000u - 111u);
  EXPECT_FALSE(Exists("k110"));
  EXPECT_TRUE(Exists("k111"));
}

TEST_F(PoolMetadataTest, LeasedUnitsAreSetAsideNotMetAgainByEveryPass) {
  MakePool();
  Mount(kObject * 4000);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(Put("k" + std::to_string(i)).ok());
  clock_.AdvanceMs(1);
  // The 1,000 least recent objects are leased, yet ranked first.
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Get("k" + std::to_string(i), 5000).status.ok());
  clock_.AdvanceMs(1);
  for (int i = 1000; i < 2000; ++i) ASSERT_TRUE(Get("k" + std::to_string(i), 1).status.ok());
  clock_.AdvanceMs(10);
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("k1000"));
  // Once seen leased, they wait aside until their lease ends.
  const uint64_t before = pool_->Stat().eviction_units_visited;
  EXPECT_EQ(pool_->EvictAtLeast(kObject * 10), kObject * 10);
  EXPECT_LE(pool_->Stat().eviction_units_visited - before, 20u);
  clock_.AdvanceMs(5000);
  EXPECT_EQ(pool_->EvictAtLeast(kObject), kObject);
  EXPECT_FALSE(Exists("k0"));  // back in its place, the least recent
}

TEST_F(PoolMetadataTest, EveryObjectLeavesTheEvictionOrder) {
  PoolOptions options;
  options.put_timeout_ms = 100;
  MakePool(options);
  Mount(kObject * 64);
  PutOptions grouped;
  grouped.group = "g";
  ASSERT_TRUE(Put("removed").ok());
  ASSERT_TRUE(Put("g0", kObject, grouped).ok());
  ASSERT_TRUE(Put("g1", kObject, grouped).ok());
  ASSERT_TRUE(PutStart("timed-out", kObject).status.ok());
  EXPECT_EQ(pool_->Stat().eviction_units, 2u);  // "removed" and g; a pending put has none
  ASSERT_TRUE(Remove("removed").ok());
  ASSERT_TRUE(Remove("g0").ok());
  EXPECT_EQ(pool_->Stat().eviction_units, 1u);
  ASSERT_TRUE(Remove("g1").ok());
  clock_.AdvanceMs(100);
  pool_->RunMaintenance();
  auto stats = pool_->Stat();
  EXPECT_EQ(stats.eviction_units, 0u);
  EXPECT_EQ(stats.objects, 0u);
  EXPECT_EQ(stats.groups, 0u);
}

// ---- segments and heartbeats ----

TEST_F(PoolMetadataTest, SilentStoreLosesSegmentsAndObjects) {
  PoolOptions options;
  options.heartbeat_ttl_ms = 5000;
  MakePool(options);
  uint64_t a = Mount(1 << 20, "store-a");
  uint64_t b = Mount(1 << 20, "store-b");
  PutOptions two;
  two.replicas = 2;
  ASSERT_TRUE(Put("both", 1000, two).ok());
  // Fill until both segments hold single-copy objects.
  std::map<uint64_t, std::string> only_on;
  for (int i = 0; only_on.size() < 2 && i < 100; ++i) {
    std::string key = "one-" + std::to_string(i);
    auto started = PutStart(key, 1000);
    ASSERT_TRUE(started.status.ok());
    ASSERT_TRUE(PutEnd(key).ok());
    only_on.emplace(started.replicas[0].segment_id, key);
  }
  ASSERT_EQ(only_on.size(), 2u);

  clock_.AdvanceMs(3000);
  EXPECT_TRUE(pool_->Heartbeat("store-a", std::vector<uint64_t>{a}).empty());
  clock_.AdvanceMs(2001);  // store-b silent for 5001 ms
  pool_->RunMaintenance();

  EXPECT_FALSE(Exists(only_on[b]));
  EXPECT_TRUE(Exists(only_on[a]));
  auto both = Get("both");
  ASSERT_TRUE(both.status.ok());
  ASSERT_EQ(both.replicas.size(), 1u);
  EXPECT_EQ(both.replicas[0].segment_id, a);
  auto stats = pool_->Stat();
  ASSERT_EQ(stats.segments.size(), 1u);
  EXPECT_EQ(stats.segments[0].info.id, a);

  // The store comes back and learns it must remount.
  EXPECT_EQ(pool_->Heartbeat("store-b", std::vector<uint64_t>{b}), std::vector<uint64_t>{b});
  uint64_t b2 = Mount(1 << 20, "store-b");
  EXPECT_NE(b2, b);  // ids are never reused
}

TEST_F(PoolMetadataTest, UnmountDropsReplicas) {
  MakePool();
  uint64_t a = Mount(1 << 20, "store-a");
  ASSERT_TRUE(Put("k").ok());
  EXPECT_TRUE(pool_->UnmountSegment(a).ok());
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(pool_->Stat().objects, 0u);
  EXPECT_EQ(pool_->UnmountSegment(a).code(), StatusCode::kNotFound);
  EXPECT_EQ(PutStart("k2", 10).status.code(), StatusCode::kUnavailable);
}

TEST_F(PoolMetadataTest, MountValidates) {
  MakePool();
  SegmentInfo info;
  info.size = 1 << 20;
  EXPECT_EQ(pool_->MountSegment(info).status().code(), StatusCode::kInvalidArgument);
  info.store_id = "s";
  info.size = 10;
  EXPECT_EQ(pool_->MountSegment(info).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvpool::master
