// The master's side of the SSD tier (pool_tiering.cc), on PoolMetadata alone: a thread stands
// in for the store's journal puller and confirms every record, collecting what it is asked to
// move; the test reports back what a store's tier would. The whole path with a real store and
// file is store/ssd_pool_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "master/pool_metadata.h"

namespace kvpool::master {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kObject = 4096;
constexpr uint64_t kSegment = 64 * kObject;

class PoolTieringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolOptions options;
    options.high_watermark = 0.5;
    options.evict_fraction = 0.25;
    options.promote_on_hit = promote_on_hit_;
    pool_ = std::make_unique<PoolMetadata>(options, &clock_);
    SegmentInfo info;
    info.store_id = "store";
    info.size = kSegment;
    info.keeps_index = true;
    info.ssd_capacity_bytes = 1 << 20;
    info.ssd_max_value_bytes = kObject;
    auto mounted = pool_->MountSegment(info);
    ASSERT_TRUE(mounted.ok());
    id_ = mounted->id;
    segment_ = pool_->FindSegment(id_);
    puller_ = std::thread([this] { Pull(); });
  }
  void TearDown() override {
    stop_ = true;
    puller_.join();
  }

  // The store's PullIndex loop, confirming everything; a PROMOTE fails when asked to.
  void Pull() {
    uint64_t journal = 0, acked = 0;
    while (!stop_) {
      proto::PullIndexReply reply;
      segment_->journal()->Pull(journal, acked, 5ms, 1000, &reply);
      journal = reply.journal_id();
      google::protobuf::RepeatedPtrField<proto::TierReport> failed;
      for (const auto& r : reply.records()) {
        std::lock_guard lock(mu_);
        records_.push_back(r);
        if (r.op() == proto::IndexRecord::PROMOTE && fail_promotions_) {
          proto::TierReport* report = failed.Add();
          report->set_kind(proto::TierReport::PROMOTE_FAILED);
          report->set_key(r.entry().key());
          report->set_put_id(r.entry().put_id());
        }
      }
      pool_->ApplyTierReports(id_, failed);  // before the ack, as the master's PullIndex does
      if (reply.records_size() > 0) acked = reply.first_seq() + reply.records_size() - 1;
    }
  }

  std::vector<proto::IndexRecord> Records(proto::IndexRecord::Op op) {
    std::lock_guard lock(mu_);
    std::vector<proto::IndexRecord> out;
    for (const auto& r : records_) {
      if (r.op() == op) out.push_back(r);
    }
    return out;
  }
  // Waits for the puller to have seen `n` records of `op` (it confirms as it goes).
  std::vector<proto::IndexRecord> AwaitRecords(proto::IndexRecord::Op op, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (Records(op).size() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return Records(op);
  }

  void Report(proto::TierReport::Kind kind, const proto::IndexRecord& record) {
    google::protobuf::RepeatedPtrField<proto::TierReport> reports;
    proto::TierReport* r = reports.Add();
    r->set_kind(kind);
    r->set_key(record.entry().key());
    r->set_put_id(record.entry().put_id());
    r->set_ssd_offset(SsdOffsetOf(record));
    pool_->ApplyTierReports(id_, reports);
  }
  // Where the store would say it wrote a demoted object in its file (any distinct place).
  static uint64_t SsdOffsetOf(const proto::IndexRecord& record) { return 4096 + record.entry().offset() * 2; }

  Status Put(const std::string& key, const std::string& group = "") {
    PutStartItem item{key, kObject, group, 0x1234};
    auto started = pool_->BatchPutStart({&item, 1}, {});
    if (!started.results[0].status.ok()) return started.results[0].status;
    std::string_view k = key;
    return pool_->BatchPutEnd({&k, 1})[0];
  }
  GetResult Get(const std::string& key) {
    std::string_view k = key;
    return pool_->BatchGetReplicas({&k, 1}, 0).results[0];
  }
  bool Exists(const std::string& key) {
    std::string_view k = key;
    std::string flags;
    pool_->BatchExists({&k, 1}, &flags);
    return flags[0] == 1;
  }

  bool promote_on_hit_ = false;  // PoolOptions::promote_on_hit, read by SetUp
  ManualClock clock_;
  std::unique_ptr<PoolMetadata> pool_;
  uint64_t id_ = 0;
  std::shared_ptr<Segment> segment_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> fail_promotions_{false};
  std::mutex mu_;
  std::vector<proto::IndexRecord> records_;
  std::thread puller_;
};

TEST_F(PoolTieringTest, AboveTheWatermarkGroupsAreDemotedWholeAndTheirBytesFreedOnlyOnceReported) {
  for (int g = 0; g < 20; ++g) {  // 40 of 64 objects: above the half-way watermark
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(Put(fmt::format("ns/c{}/s{}", g, s), fmt::format("ns/c{}", g)).ok());
    clock_.AdvanceMs(1);
  }
  const uint64_t used_before = pool_->Stat().used_bytes;
  pool_->RunMaintenance();
  const auto demotes = AwaitRecords(proto::IndexRecord::DEMOTE, 16);  // 25% of 64 objects
  ASSERT_EQ(demotes.size(), 16u);
  // Oldest first, a group's members together; still readable from the segment meanwhile.
  for (size_t i = 0; i < demotes.size(); ++i) {
    EXPECT_EQ(demotes[i].entry().group(), fmt::format("ns/c{}", i / 2));
    EXPECT_EQ(demotes[i].entry().checksum(), 0x1234u);
  }
  EXPECT_EQ(pool_->Stat().used_bytes, used_before);
  EXPECT_TRUE(Get("ns/c0/s0").status.ok());  // leased now: its bytes must outlive the lease
  EXPECT_EQ(pool_->Stat().tiers.demoting_bytes, 16 * kObject);
  pool_->RunMaintenance();  // a second pass does not demote them again
  EXPECT_EQ(Records(proto::IndexRecord::DEMOTE).size(), 16u);

  for (const auto& d : demotes) Report(proto::TierReport::DEMOTED, d);
  const PoolStats after = pool_->Stat();
  EXPECT_EQ(after.tiers.demotions, 16u);
  EXPECT_EQ(after.tiers.ssd_objects, 16u);
  EXPECT_EQ(after.tiers.ssd_used_bytes, 16 * kObject);
  EXPECT_EQ(after.tiers.demoting_bytes, 0u);
  EXPECT_EQ(after.used_bytes, used_before - 15 * kObject);  // the leased one waits for its lease
  EXPECT_TRUE(Exists("ns/c0/s0"));
  clock_.AdvanceMs(10'000);
  pool_->RunMaintenance();
  EXPECT_LE(pool_->Stat().used_bytes, used_before - 16 * kObject);
}

// By default a lookup sends the client to the tier's file, where the store said it wrote the
// object, and tells the store it was used; nothing moves.
TEST_F(PoolTieringTest, ReadingAnSsdObjectAnswersWhereItLiesInTheFileAndMarksItUsed) {
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(Put(fmt::format("ns/k{}", i)).ok());
  pool_->RunMaintenance();
  const auto demotes = AwaitRecords(proto::IndexRecord::DEMOTE, 16);
  for (const auto& d : demotes) Report(proto::TierReport::DEMOTED, d);

  const GetResult got = Get(demotes[3].entry().key());
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_TRUE(got.on_ssd);
  ASSERT_EQ(got.replicas.size(), 1u);
  EXPECT_EQ(got.replicas[0].segment_id, id_);
  EXPECT_EQ(got.replicas[0].offset, SsdOffsetOf(demotes[3]));
  EXPECT_EQ(got.checksum, 0x1234u);
  EXPECT_FALSE(Get("ns/k39").on_ssd);  // still in the segment
  const auto touches = AwaitRecords(proto::IndexRecord::TOUCH_SSD, 1);
  ASSERT_EQ(touches.size(), 1u);
  EXPECT_EQ(touches[0].entry().key(), demotes[3].entry().key());
  EXPECT_TRUE(Records(proto::IndexRecord::PROMOTE).empty());
  const PoolStats stats = pool_->Stat();
  EXPECT_EQ(stats.tiers.promotions, 0u);
  EXPECT_EQ(stats.tiers.ssd_hits, 1u);
  EXPECT_EQ(stats.tiers.ssd_objects, 16u);
}

class PromotingPoolTieringTest : public PoolTieringTest {
 protected:
  PromotingPoolTieringTest() { promote_on_hit_ = true; }
};

TEST_F(PromotingPoolTieringTest, ReadingAnSsdObjectLoadsItIntoTheSegmentAndAFailedLoadIsAMiss) {
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(Put(fmt::format("ns/k{}", i)).ok());
  pool_->RunMaintenance();
  const auto demotes = AwaitRecords(proto::IndexRecord::DEMOTE, 16);
  for (const auto& d : demotes) Report(proto::TierReport::DEMOTED, d);

  const GetResult got = Get(demotes[0].entry().key());
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  const auto promotes = Records(proto::IndexRecord::PROMOTE);
  ASSERT_EQ(promotes.size(), 1u);
  ASSERT_EQ(got.replicas.size(), 1u);
  EXPECT_EQ(got.replicas[0].offset, promotes[0].entry().offset());  // where the store loaded it
  EXPECT_EQ(got.checksum, 0x1234u);
  EXPECT_EQ(pool_->Stat().tiers.promotions, 1u);
  EXPECT_EQ(pool_->Stat().tiers.ssd_objects, 15u);

  fail_promotions_ = true;
  const GetResult missed = Get(demotes[1].entry().key());
  EXPECT_EQ(missed.status.code(), StatusCode::kNotFound) << missed.status.ToString();
  EXPECT_FALSE(Exists(demotes[1].entry().key()));
  EXPECT_EQ(pool_->Stat().tiers.promotion_failures, 1u);
}

TEST_F(PoolTieringTest, AFailedDemotionDropsTheWholeGroupAndSsdEvictionsAndRemovalsLeaveTheIndex) {
  for (int g = 0; g < 20; ++g) {
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(Put(fmt::format("ns/c{}/s{}", g, s), fmt::format("ns/c{}", g)).ok());
    clock_.AdvanceMs(1);
  }
  pool_->RunMaintenance();
  const auto demotes = AwaitRecords(proto::IndexRecord::DEMOTE, 16);
  Report(proto::TierReport::DEMOTED, demotes[0]);       // ns/c0/s0 reached SSD ...
  Report(proto::TierReport::DEMOTE_FAILED, demotes[1]);  // ... ns/c0/s1 did not: c0 goes whole
  EXPECT_FALSE(Exists("ns/c0/s0"));
  EXPECT_FALSE(Exists("ns/c0/s1"));
  EXPECT_EQ(pool_->Stat().tiers.demotion_failures, 1u);
  EXPECT_EQ(pool_->Stat().tiers.ssd_objects, 0u);

  Report(proto::TierReport::DEMOTED, demotes[2]);
  Report(proto::TierReport::DEMOTED, demotes[3]);
  ASSERT_TRUE(Exists("ns/c1/s0"));
  proto::IndexRecord evicted = demotes[2];
  evicted.mutable_entry()->set_put_id(0);  // a store's eviction names the key only
  Report(proto::TierReport::SSD_EVICTED, evicted);
  EXPECT_FALSE(Exists("ns/c1/s0"));
  EXPECT_EQ(pool_->Stat().tiers.ssd_evictions, 1u);

  std::string_view removed = "ns/c1/s1";
  ASSERT_TRUE(pool_->BatchRemove({&removed, 1})[0].ok());
  // c0/s0 (its group dropped), c1/s0 (evicted: the store has it no more either), c1/s1
  const auto drops = AwaitRecords(proto::IndexRecord::DROP_SSD, 3);
  ASSERT_EQ(drops.size(), 3u);
  EXPECT_EQ(drops[0].entry().key(), "ns/c0/s0");
  EXPECT_EQ(drops[2].entry().key(), "ns/c1/s1");
  EXPECT_EQ(pool_->Stat().tiers.ssd_objects, 0u);
  // A report about an object that is gone asks the store to drop its copy.
  Report(proto::TierReport::DEMOTED, demotes[1]);
  EXPECT_EQ(AwaitRecords(proto::IndexRecord::DROP_SSD, 4).back().entry().key(), "ns/c0/s1");
}

TEST_F(PoolTieringTest, AMountingStoresSsdObjectsJoinThePoolUnlessThePoolHasTheKey) {
  ASSERT_TRUE(Put("ns/here").ok());
  proto::IndexEntry here;
  here.set_key("ns/here");
  here.set_length(kObject);
  here.set_on_ssd(true);
  proto::IndexEntry back = here;
  back.set_key("ns/back");
  back.set_checksum(77);
  proto::IndexEntry in_segment = back;  // not an SSD entry: a rejoin's business, not this
  in_segment.set_key("ns/in-segment");
  in_segment.set_on_ssd(false);
  const proto::IndexEntry* entries[] = {&here, &back, &in_segment};
  EXPECT_EQ(pool_->TakeSsdObjects(id_, entries), 1u);
  EXPECT_TRUE(Exists("ns/back"));
  EXPECT_FALSE(Exists("ns/in-segment"));
  EXPECT_EQ(pool_->Stat().tiers.ssd_objects, 1u);
  // The store's older copy of a key the pool holds is dropped from its file.
  const auto drops = AwaitRecords(proto::IndexRecord::DROP_SSD, 1);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].entry().key(), "ns/here");
  const GetResult got = Get("ns/back");
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.checksum, 77u);
}

}  // namespace
}  // namespace kvpool::master
