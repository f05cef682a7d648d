// StorageService against the real master (kvpool_master's MasterServer, on a ManualClock so
// heartbeat expiry happens when the test says): mount, bytes placed by the master, drop by
// ttl and remount, unmount on Stop.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"
#include "store/storage_service.h"
#include "transfer/transfer_engine.h"

namespace kvpool::store {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

constexpr auto kPatience = 20s;  // bound for "did not hang" only

class StorageServiceMasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kvpool-store-master-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    master::MasterOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "";
    options.default_lease_ms = 200;
    options.max_lease_ms = 300;
    options.heartbeat_ttl_ms = 1000;
    auto server = master::MasterServer::Start(options, &clock_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    master_ = std::move(server).value();
  }

  void TearDown() override {
    if (master_) master_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  StorageOptions Options() {
    StorageOptions o;
    o.master_address = master_->address();
    o.memory_bytes = 16 << 20;
    o.tcp_listen = "127.0.0.1:0";
    o.shm_socket_dir = dir_.string();
    o.heartbeat_interval = 50ms;
    o.rpc_timeout = 2000ms;
    return o;
  }

  std::vector<master::SegmentStats> Segments() { return master_->pool().Stat().segments; }

  ManualClock clock_;
  std::unique_ptr<master::MasterServer> master_;
  std::filesystem::path dir_;
};

TEST_F(StorageServiceMasterTest, MountedSegmentTakesObjectsTheMasterPlaces) {
  auto started = StorageService::Start(Options());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& store = *started;
  ASSERT_NE(store->segment_id(), 0u);

  auto segments = Segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].info.id, store->segment_id());
  EXPECT_EQ(segments[0].info.store_id, store->store_id());
  EXPECT_EQ(segments[0].info.tcp_address, store->tcp_address());
  EXPECT_EQ(segments[0].info.shm_socket, store->shm_socket_path());
  EXPECT_EQ(segments[0].info.size, 16u << 20);

  // Place an object through the master, write it over tcp, read it back over shm.
  const std::string value(100'000, 'v');
  const std::string_view key = "object";
  const master::PutStartItem item{key, value.size()};
  auto put = master_->pool().BatchPutStart({&item, 1}, {});
  ASSERT_TRUE(put.results[0].status.ok()) << put.results[0].status.ToString();
  const master::ReplicaView at = put.results[0].replicas.at(0);
  ASSERT_EQ(at.segment_id, store->segment_id());

  transfer::SegmentEndpoint endpoint{at.segment_id, store->store_id(), transfer::LocalHostId(),
                                     store->tcp_address(), store->shm_socket_path(),
                                     store->memory().size()};
  transfer::TransferOptions tcp_only;
  tcp_only.allow_shm = false;
  transfer::TransferEngine writer(tcp_only);
  ASSERT_TRUE(writer.OpenSegment(endpoint).ok());
  std::string in = value;
  transfer::TransferRequest write{transfer::OpKind::kWrite, in.data(), at.segment_id, at.offset,
                                  at.length};
  ASSERT_TRUE(writer.Transfer({&write, 1}, steady_clock::now() + 10s).ok());
  ASSERT_TRUE(master_->pool().BatchPutEnd(std::vector<std::string_view>{key})[0].ok());

  auto got = master_->pool().BatchGetReplicas(std::vector<std::string_view>{key}, 0);
  ASSERT_TRUE(got.results[0].status.ok());
  transfer::TransferEngine reader;
  ASSERT_TRUE(reader.OpenSegment(endpoint).ok());
  std::string out(value.size(), '\0');
  transfer::TransferRequest read{transfer::OpKind::kRead, out.data(), at.segment_id, at.offset,
                                 at.length};
  ASSERT_TRUE(reader.Transfer({&read, 1}, steady_clock::now() + 10s).ok());
  EXPECT_EQ(reader.TransportFor(at.segment_id), "shm");
  EXPECT_EQ(out, value);

  store->Stop();
  EXPECT_TRUE(Segments().empty());  // unmounted
}

TEST_F(StorageServiceMasterTest, RemountsUnderANewIdAfterTheMasterDropsIt) {
  auto started = StorageService::Start(Options());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& store = *started;
  const uint64_t first = store->segment_id();

  // Silence longer than the ttl, as far as the master can tell. A beat that lands between the
  // clock jump and the master's expiry pass refreshes the segment, so jump until it sticks.
  const auto deadline = steady_clock::now() + kPatience;
  while (store->remounts() == 0 && steady_clock::now() < deadline) {
    clock_.AdvanceMs(2000);
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(store->remounts(), 1u);
  // The last jump may also have expired the new segment (then the store remounts again):
  // with the clock left alone, wait for the store and the master to agree on one id.
  auto agreed = [&] {
    auto segments = Segments();
    return store->segment_id() != 0 && segments.size() == 1 &&
           segments[0].info.id == store->segment_id();
  };
  while (!agreed() && steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(agreed());
  const uint64_t second = store->segment_id();
  EXPECT_GT(second, first);

  // The old id is refused by the store's server; the new one is served.
  transfer::TransferOptions tcp_only;
  tcp_only.allow_shm = false;
  transfer::TransferEngine engine(tcp_only);
  char byte = 'x';
  for (uint64_t id : {first, second}) {
    ASSERT_TRUE(engine
                    .OpenSegment({id, store->store_id(), transfer::LocalHostId(),
                                  store->tcp_address(), "", store->memory().size()})
                    .ok());
  }
  transfer::TransferRequest old_id{transfer::OpKind::kWrite, &byte, first, 0, 1};
  EXPECT_EQ(engine.Transfer({&old_id, 1}, steady_clock::now() + 10s).code(), StatusCode::kStale);
  transfer::TransferRequest new_id{transfer::OpKind::kWrite, &byte, second, 0, 1};
  EXPECT_TRUE(engine.Transfer({&new_id, 1}, steady_clock::now() + 10s).ok());
}

}  // namespace
}  // namespace kvpool::store
