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

  std::vector<master::SegmentStats> Segments() { return master_->pool()->Stat().segments; }

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
  auto put = master_->pool()->BatchPutStart({&item, 1}, {});
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
  ASSERT_TRUE(master_->pool()->BatchPutEnd(std::vector<std::string_view>{key})[0].ok());

  auto got = master_->pool()->BatchGetReplicas(std::vector<std::string_view>{key}, 0);
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

TEST_F(StorageServiceMasterTest, AfterATtlDropTheStoreRejoinsWithItsObjects) {
  auto started = StorageService::Start(Options());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  auto& store = *started;
  const uint64_t id = store->segment_id();

  // A complete object and a pending one: the master answered each call only once the store's
  // index had it.
  const std::string value(50'000, 'k');
  const master::PutStartItem items[] = {{"kept", value.size(), "g"}, {"pending", 4096, ""}};
  master::PutOptions pinned;
  pinned.pin_ttl_ms = 600'000;
  auto put = master_->pool()->BatchPutStart(items, pinned);
  ASSERT_TRUE(put.results[0].status.ok()) << put.results[0].status.ToString();
  ASSERT_TRUE(put.results[1].status.ok()) << put.results[1].status.ToString();
  const master::ReplicaView at = put.results[0].replicas.at(0);
  transfer::SegmentEndpoint endpoint{id, store->store_id(), transfer::LocalHostId(),
                                     store->tcp_address(), store->shm_socket_path(),
                                     store->memory().size()};
  transfer::TransferEngine engine;
  ASSERT_TRUE(engine.OpenSegment(endpoint).ok());
  std::string in = value;
  transfer::TransferRequest write{transfer::OpKind::kWrite, in.data(), id, at.offset, at.length};
  ASSERT_TRUE(engine.Transfer({&write, 1}, steady_clock::now() + 10s).ok());
  ASSERT_TRUE(master_->pool()->BatchPutEnd(std::vector<std::string_view>{"kept"})[0].ok());
  EXPECT_EQ(store->indexed_objects(), 2u);

  // Silence longer than the ttl, as far as the master can tell: it drops the segment and every
  // object on it. A beat that lands between the clock jump and the expiry pass refreshes the
  // segment, so jump until the store has had to rejoin.
  const auto deadline = steady_clock::now() + kPatience;
  // Each jump waits for the rejoin a while before the next: every jump also ages the pending
  // put toward its timeout (30 s of this clock), which must not pass before the rejoin.
  while (store->rejoins() == 0 && steady_clock::now() < deadline) {
    clock_.AdvanceMs(1500);
    for (int i = 0; i < 50 && store->rejoins() == 0; ++i) std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(store->rejoins(), 1u);
  auto agreed = [&] {
    auto segments = Segments();
    return segments.size() == 1 && segments[0].info.id == id && segments[0].objects == 2;
  };
  while (!agreed() && steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(agreed());
  EXPECT_EQ(store->segment_id(), id);  // the same id: clients' cached endpoints stay right
  EXPECT_EQ(store->remounts(), 0u);
  EXPECT_GE(master_->pool()->Stat().rebuilt_objects, 2u);

  // The complete object is served again, bytes and all; the pending one is still pending
  // (its writer may end it), not visible.
  auto got = master_->pool()->BatchGetReplicas(std::vector<std::string_view>{"kept", "pending"}, 0);
  ASSERT_TRUE(got.results[0].status.ok()) << got.results[0].status.ToString();
  EXPECT_EQ(got.results[1].status.code(), StatusCode::kNotReady);
  ASSERT_EQ(got.results[0].replicas.size(), 1u);
  EXPECT_EQ(got.results[0].replicas[0].offset, at.offset);
  std::string out(value.size(), '\0');
  transfer::TransferRequest read{transfer::OpKind::kRead, out.data(), id, at.offset, at.length};
  ASSERT_TRUE(engine.Transfer({&read, 1}, steady_clock::now() + 10s).ok());
  EXPECT_EQ(out, value);
  EXPECT_TRUE(master_->pool()->BatchPutEnd(std::vector<std::string_view>{"pending"})[0].ok());
}

}  // namespace
}  // namespace kvpool::store
