// The SSD tier in the pool (issue 17): a real master, a real storage service with an SSD tier
// on a real file, and the real client. Objects that pass the segment's watermark are demoted
// to SSD rather than dropped, read back through the pool with the bytes they were put with, a
// flipped bit on the file is a miss (never bytes), a store restarted on its file brings its
// SSD objects back, and the store's /metrics says what its tier did. Each test runs three ways:
// the client reads SSD objects from the tier's file itself (same host), has the store read them
// for it over tcp, or the master has them loaded back into DRAM first (--promote-on-hit).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "client/client.h"
#include "http/test_http_client.h"
#include "common/clock.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"
#include "ssd/ssd_tier.h"
#include "store/storage_service.h"

namespace kvpool::store {
namespace {

using namespace std::chrono_literals;

constexpr auto kPatience = 30s;  // bound for "did not hang" only
constexpr uint64_t kObject = 256 << 10;
constexpr int kObjects = 48;  // 12 MiB into a 16 MiB segment whose watermark is at half

std::string ValueOf(int i) {
  std::string v(kObject, '\0');
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<char>((k * 131 + static_cast<size_t>(i) * 7919) >> 3);
  return v;
}

enum class ReadPath { kFileSameHost, kFileOverTcp, kPromote };

std::string PathName(const ::testing::TestParamInfo<ReadPath>& info) {
  switch (info.param) {
    case ReadPath::kFileSameHost: return "FileSameHost";
    case ReadPath::kFileOverTcp: return "FileOverTcp";
    case ReadPath::kPromote: return "PromoteOnHit";
  }
  return "";
}

class SsdPoolTest : public ::testing::TestWithParam<ReadPath> {
 protected:
  bool promote() const { return GetParam() == ReadPath::kPromote; }

  void SetUp() override {
    char pattern[] = "/var/tmp/kvpool-ssd-pool-test-XXXXXX";  // /var/tmp: a disk, not tmpfs, where there is one
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    master::MasterOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "";
    options.high_watermark = 0.5;
    options.maintenance_interval_ms = 10;
    options.promote_on_hit = promote();
    auto server = master::MasterServer::Start(options, &clock_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    master_ = std::move(server).value();
    StartStore();
    ConnectClient();
  }

  // A client of the pool that reads over shm or, for kFileOverTcp, only over tcp.
  void ConnectClient(std::chrono::milliseconds lease = 0ms) {
    client::ClientOptions o;
    o.pool = client::PoolParts::Single(master_->address());
    o.transfer.allow_shm = GetParam() != ReadPath::kFileOverTcp;
    o.lease = lease;
    auto c = client::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }

  void TearDown() override {
    client_.reset();
    store_.reset();
    if (master_) master_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  void StartStore() {
    StorageOptions o;
    o.master_address = master_->address();
    o.memory_bytes = 16 << 20;
    o.shm_socket_dir = dir_.string();
    o.heartbeat_interval = 50ms;
    o.store_id = "ssd-store";
    o.ssd_path = (dir_ / "tier").string();
    o.ssd_bytes = 64 << 20;
    o.ssd_max_object_bytes = kObject;
    o.metrics_listen = "127.0.0.1:0";
    auto started = StorageService::Start(o);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    store_ = std::move(started).value();
  }

  master::TierStats Tiers() { return master_->pool()->Stat().tiers; }

  // Puts every object, one call each, and waits until the master has demoted `at_least`.
  void PutAllAndWaitForDemotions(uint64_t at_least) {
    for (int i = 0; i < kObjects; ++i) {
      const std::string v = ValueOf(i);
      ASSERT_TRUE(client_->Put("ns/obj" + std::to_string(i), std::as_bytes(std::span(v))).ok());
    }
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    // Until it has demoted that many and stopped: below the watermark, nothing on its way.
    auto settled = [&] {
      const master::PoolStats stats = master_->pool()->Stat();
      return stats.tiers.demotions >= at_least && stats.tiers.demoting_bytes == 0 &&
             stats.used_bytes <= stats.capacity_bytes / 2;
    };
    while (!settled() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(settled());
  }

  ManualClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<master::MasterServer> master_;
  std::unique_ptr<StorageService> store_;
  std::unique_ptr<client::Client> client_;
};

TEST_P(SsdPoolTest, ObjectsPastTheWatermarkAreDemotedNotDroppedAndReadBackWhole) {
  PutAllAndWaitForDemotions(8);
  const master::TierStats tiers = Tiers();
  EXPECT_EQ(tiers.demotion_failures, 0u);
  EXPECT_GT(tiers.ssd_used_bytes, 0u);
  EXPECT_EQ(tiers.ssd_capacity_bytes, store_->ssd()->capacity_bytes());
  EXPECT_EQ(master_->pool()->Stat().evicted_objects, 0u);  // nothing dropped: SSD had room
  for (int i = 0; i < kObjects; ++i) {
    auto got = client_->Get("ns/obj" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    ASSERT_EQ(*got, ValueOf(i)) << i;
  }
  EXPECT_EQ(Tiers().promotion_failures, 0u);
  EXPECT_EQ(client_->checksum_mismatches(), 0u);
  if (promote()) {
    EXPECT_GE(Tiers().promotions, 1u);
  } else {
    // Read from the file where they lie: none loaded back, every one still on SSD, and the
    // engine used the transport asked for.
    EXPECT_EQ(Tiers().promotions, 0u);
    EXPECT_GE(Tiers().ssd_hits, tiers.ssd_objects);
    EXPECT_GE(Tiers().ssd_objects, tiers.ssd_objects);
    EXPECT_EQ(client_->transfer_engine().TransportFor(master_->pool()->Stat().segments.at(0).info.id),
              GetParam() == ReadPath::kFileOverTcp ? "tcp" : "shm");
  }
  // The store's own /metrics says what its tier did (at least what the master had counted of
  // it before the reads above, which may have demoted more).
  const std::string metrics = http::testing::HttpGet(store_->metrics_port(), "/metrics");
  auto value_of = [&](const std::string& name) -> uint64_t {
    const std::string series = name + "{store=\"ssd-store\"} ";
    const size_t at = metrics.find("\n" + series);
    EXPECT_NE(at, std::string::npos) << series << "\n" << metrics;
    return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + 1 + series.size()));
  };
  const uint64_t demotions = value_of("kvpool_store_ssd_demotions_total");
  EXPECT_GE(demotions, tiers.demotions);
  EXPECT_EQ(value_of("kvpool_store_ssd_written_bytes_total"), demotions * kObject);
  EXPECT_GE(value_of("kvpool_store_ssd_promotions_total"), promote() ? 1u : 0u);
  EXPECT_EQ(value_of("kvpool_store_ssd_promotion_failures_total"), 0u);
  EXPECT_EQ(value_of("kvpool_store_ssd_capacity_bytes"), store_->ssd()->capacity_bytes());
  EXPECT_EQ(value_of("kvpool_store_mounted"), 1u);
  EXPECT_EQ(http::testing::HttpGet(store_->metrics_port(), "/health").rfind("HTTP/1.1 200 OK", 0), 0u);
}

TEST_P(SsdPoolTest, AFlippedBitOnTheSsdIsAMissNeverBytes) {
  PutAllAndWaitForDemotions(8);
  const uint64_t on_ssd = Tiers().ssd_objects;
  // One bit in every slot's value, through the file itself.
  const int fd = ::open((dir_ / "tier").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const uint64_t slot = kObject + ssd::SsdTier::kHeaderBytes;
  const uint64_t file_size = std::filesystem::file_size(dir_ / "tier");
  for (uint64_t off = ssd::SsdTier::kHeaderBytes + 100; off < file_size; off += slot) {
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(off)), 1);
    c ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  }
  ::fsync(fd);
  ::close(fd);
  int served = 0, missed = 0;
  for (int i = 0; i < kObjects; ++i) {
    auto got = client_->Get("ns/obj" + std::to_string(i));
    if (got.ok()) {
      ASSERT_EQ(*got, ValueOf(i)) << i;  // only objects still in the segment
      ++served;
    } else {
      ++missed;
    }
  }
  EXPECT_EQ(static_cast<uint64_t>(missed), on_ssd);  // every object that was on SSD, none served
  // Caught by the store as it loaded them, or by the client as they landed.
  EXPECT_EQ(promote() ? Tiers().promotion_failures : client_->checksum_mismatches(), static_cast<uint64_t>(missed));
  EXPECT_GT(served, 0);
}

TEST_P(SsdPoolTest, AStoreRestartedOnItsFileBringsItsSsdObjectsBack) {
  PutAllAndWaitForDemotions(8);
  const uint64_t on_ssd = Tiers().ssd_objects;
  ASSERT_GT(on_ssd, 0u);
  store_->Stop();  // unmounts: the master forgets the segment and everything on it
  store_.reset();
  ASSERT_EQ(master_->pool()->Stat().objects, 0u);
  StartStore();
  EXPECT_EQ(Tiers().ssd_objects, on_ssd);
  uint64_t back = 0;
  for (int i = 0; i < kObjects; ++i) {
    auto got = client_->Get("ns/obj" + std::to_string(i));
    if (!got.ok()) continue;  // was in the segment: gone with the old process
    ASSERT_EQ(*got, ValueOf(i)) << i;
    ++back;
  }
  EXPECT_EQ(back, on_ssd);
}

// No lease pins an object on SSD (its checksum guards the read), so a read from the file that
// starts after the lookup's lease ended still succeeds; one from the segment does not.
TEST_P(SsdPoolTest, ReadsFromTheFileAreNotBoundByTheLease) {
  if (promote()) GTEST_SKIP() << "promoted objects are read from the segment, under the lease";
  PutAllAndWaitForDemotions(8);
  ASSERT_NO_FATAL_FAILURE(ConnectClient(100ms));  // short leases
  std::vector<std::string> keys;
  for (int i = 0; i < kObjects; ++i) keys.push_back("ns/obj" + std::to_string(i));
  const client::LookupResult lookup = client_->BatchLookup(keys);
  std::vector<size_t> on_ssd, in_dram;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(lookup.length(i).ok()) << i;
    (lookup.on_ssd(i) ? on_ssd : in_dram).push_back(i);
  }
  ASSERT_FALSE(on_ssd.empty());
  ASSERT_FALSE(in_dram.empty());
  std::this_thread::sleep_until(lookup.lease_deadline() + 10ms);
  std::vector<std::string> values(keys.size(), std::string(kObject, '\0'));
  std::vector<client::ValueBuffer> buffers;
  for (size_t i : on_ssd) buffers.push_back(std::as_writable_bytes(std::span(values[i])));
  const auto read = client_->ReadLookedUp(lookup, on_ssd, buffers);
  for (size_t n = 0; n < on_ssd.size(); ++n) {
    ASSERT_TRUE(read[n].ok()) << on_ssd[n] << ": " << read[n].status().ToString();
    EXPECT_EQ(values[on_ssd[n]], ValueOf(static_cast<int>(on_ssd[n])));
  }
  client::ValueBuffer late = std::as_writable_bytes(std::span(values[in_dram[0]]));
  EXPECT_EQ(client_->ReadLookedUp(lookup, {&in_dram[0], 1}, {&late, 1})[0].status().code(), StatusCode::kTimeout);
}

INSTANTIATE_TEST_SUITE_P(ReadPaths, SsdPoolTest,
                         ::testing::Values(ReadPath::kFileSameHost, ReadPath::kFileOverTcp, ReadPath::kPromote),
                         PathName);

}  // namespace
}  // namespace kvpool::store
