// StorageService against an in-test master that records every call and can drop a segment
// or refuse to answer on demand; bytes are checked through a real transfer::TransferEngine.
#include "store/storage_service.h"

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "proto/master.grpc.pb.h"
#include "transfer/transfer_engine.h"

namespace kvpool::store {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

// Generous bound for "did not hang"; no test relies on anything finishing faster than this.
constexpr auto kPatience = 20s;

class FakeMaster final : public proto::Master::Service {
 public:
  struct Mount {
    proto::SegmentEndpoint endpoint;
    steady_clock::time_point at;
  };

  uint64_t max_lease_ms = 200;
  uint64_t heartbeat_ttl_ms = 5000;

  grpc::Status MountSegment(grpc::ServerContext*, const proto::MountSegmentRequest* request,
                            proto::MountSegmentReply* reply) override {
    std::lock_guard lock(mu_);
    if (request->rejoin_segment_id() != 0) {
      // This master never takes a segment back: the store falls back to a fresh mount.
      ++refused_rejoins_;
      reply->set_code(proto::STALE);
      reply->set_message("test master refuses rejoins");
      return grpc::Status::OK;
    }
    mounts_.push_back({request->segment(), steady_clock::now()});
    if (refuse_mounts_) {
      reply->set_code(proto::NO_SPACE);
      reply->set_message("test master is full");
    } else {
      const uint64_t id = next_id_++;
      live_.insert(id);
      reply->set_code(proto::OK);
      reply->set_segment_id(id);
      reply->set_heartbeat_ttl_ms(heartbeat_ttl_ms);
      reply->set_max_lease_ms(max_lease_ms);
    }
    changed_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status UnmountSegment(grpc::ServerContext*, const proto::UnmountSegmentRequest* request,
                              proto::UnmountSegmentReply* reply) override {
    std::lock_guard lock(mu_);
    unmounts_.push_back(request->segment_id());
    live_.erase(request->segment_id());
    reply->set_code(proto::OK);
    changed_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest* request,
                         proto::HeartbeatReply* reply) override {
    std::lock_guard lock(mu_);
    if (fail_heartbeats_) {
      ++failed_heartbeats_;
      changed_.notify_all();
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "test master is not answering");
    }
    heartbeats_.push_back(*request);
    for (uint64_t id : request->segment_ids()) {
      if (live_.count(id) == 0) {
        reply->add_unknown_segment_ids(id);
        drop_reported_at_ = steady_clock::now();
      }
    }
    reply->set_code(proto::OK);
    changed_.notify_all();
    return grpc::Status::OK;
  }

  // Forgets a segment, as the master does when a store's heartbeats stop.
  void Drop(uint64_t id) {
    std::lock_guard lock(mu_);
    live_.erase(id);
  }
  void set_fail_heartbeats(bool fail) {
    std::lock_guard lock(mu_);
    fail_heartbeats_ = fail;
  }
  void set_refuse_mounts(bool refuse) {
    std::lock_guard lock(mu_);
    refuse_mounts_ = refuse;
  }

  // Waits until `done` (called under the lock) holds; false after kPatience.
  bool WaitFor(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kPatience, done);
  }

  std::vector<Mount> mounts() {
    std::lock_guard lock(mu_);
    return mounts_;
  }
  std::vector<proto::HeartbeatRequest> heartbeats() {
    std::lock_guard lock(mu_);
    return heartbeats_;
  }
  std::vector<uint64_t> unmounts() {
    std::lock_guard lock(mu_);
    return unmounts_;
  }
  int refused_rejoins() {
    std::lock_guard lock(mu_);
    return refused_rejoins_;
  }
  steady_clock::time_point drop_reported_at() {
    std::lock_guard lock(mu_);
    return drop_reported_at_;
  }

  // Unlocked views for use inside WaitFor predicates.
  size_t mount_count_locked() const { return mounts_.size(); }
  size_t heartbeat_count_locked() const { return heartbeats_.size(); }
  size_t failed_heartbeats_locked() const { return failed_heartbeats_; }
  size_t unmount_count_locked() const { return unmounts_.size(); }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t next_id_ = 1;
  std::set<uint64_t> live_;
  bool fail_heartbeats_ = false;
  bool refuse_mounts_ = false;
  size_t failed_heartbeats_ = 0;
  std::vector<Mount> mounts_;
  std::vector<proto::HeartbeatRequest> heartbeats_;
  std::vector<uint64_t> unmounts_;
  steady_clock::time_point drop_reported_at_;
  int refused_rejoins_ = 0;
};

// A port nothing listens on (bound, then released).
// A loopback port that refuses connections for as long as this lives: bound, so no other
// process can take it meanwhile, and never listening, so a connect gets ECONNREFUSED. (A port
// closed again at once could be anyone's by the time the test connects.)
class RefusingPort {
 public:
  RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() { close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

class StorageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kvpool-store-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    StartMaster();
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }

  void StartMaster() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&master_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  StorageOptions Options() {
    StorageOptions o;
    o.master_address = "127.0.0.1:" + std::to_string(port_);
    o.memory_bytes = 8 << 20;
    o.tcp_listen = "127.0.0.1:0";
    o.shm_socket_dir = dir_.string();
    o.heartbeat_interval = 20ms;
    o.rpc_timeout = 2000ms;
    return o;
  }

  std::unique_ptr<StorageService> StartStore(const StorageOptions& o) {
    auto service = StorageService::Start(o);
    EXPECT_TRUE(service.ok()) << service.status().ToString();
    return service.ok() ? std::move(service).value() : nullptr;
  }

  // Writes `data` at `offset` of segment `id` and reads it back, over tcp or shm.
  static Status RoundTrip(const StorageService& store, uint64_t id, bool shm,
                          const std::string& data, uint64_t offset) {
    transfer::TransferOptions options;
    options.allow_shm = shm;
    transfer::TransferEngine engine(options);
    KVPOOL_RETURN_IF_ERROR(engine.OpenSegment({id, store.store_id(), transfer::LocalHostId(),
                                               store.tcp_address(), store.shm_socket_path(),
                                               store.memory().size()}));
    std::string in = data, out(data.size(), '\0');
    transfer::TransferRequest write{transfer::OpKind::kWrite, in.data(), id, offset, in.size()};
    KVPOOL_RETURN_IF_ERROR(engine.Transfer({&write, 1}, steady_clock::now() + 10s));
    transfer::TransferRequest read{transfer::OpKind::kRead, out.data(), id, offset, out.size()};
    KVPOOL_RETURN_IF_ERROR(engine.Transfer({&read, 1}, steady_clock::now() + 10s));
    if (out != data) return Internal("read back different bytes");
    return Status::Ok();
  }

  std::filesystem::path dir_;
  FakeMaster master_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(StorageServiceTest, MountsTheSegmentAndServesItsBytes) {
  StorageOptions o = Options();
  o.store_id = "store-under-test";
  auto store = StartStore(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->segment_id(), 1u);

  auto mounts = master_.mounts();
  ASSERT_EQ(mounts.size(), 1u);
  const proto::SegmentEndpoint& e = mounts[0].endpoint;
  EXPECT_EQ(e.store_id(), "store-under-test");
  EXPECT_EQ(e.host_id(), transfer::LocalHostId());
  EXPECT_EQ(e.tcp_address(), store->tcp_address());
  EXPECT_EQ(e.tcp_address().rfind("127.0.0.1:", 0), 0u) << e.tcp_address();
  EXPECT_NE(e.tcp_address(), "127.0.0.1:0");
  EXPECT_EQ(e.shm_socket(), (dir_ / "kvpool-store-under-test.sock").string());
  EXPECT_TRUE(std::filesystem::exists(e.shm_socket()));
  EXPECT_EQ(e.size(), 8u << 20);

  EXPECT_TRUE(RoundTrip(*store, 1, /*shm=*/false, "over tcp", 4096).ok());
  EXPECT_TRUE(RoundTrip(*store, 1, /*shm=*/true, "over shm", (8 << 20) - 8).ok());
}

TEST_F(StorageServiceTest, RandomStoreIdsDiffer) {
  auto a = StartStore(Options());
  auto b = StartStore(Options());
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->store_id(), b->store_id());
  EXPECT_NE(a->shm_socket_path(), b->shm_socket_path());
  EXPECT_NE(a->segment_id(), b->segment_id());
}

TEST_F(StorageServiceTest, WildcardListenAdvertisesLoopbackOrTheGivenHost) {
  StorageOptions o = Options();
  o.tcp_listen = "0.0.0.0:0";
  auto loopback = StartStore(o);
  ASSERT_NE(loopback, nullptr);
  EXPECT_EQ(loopback->tcp_address().rfind("127.0.0.1:", 0), 0u) << loopback->tcp_address();

  o.advertise_host = "store7.example";
  auto named = StartStore(o);
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->tcp_address().rfind("store7.example:", 0), 0u) << named->tcp_address();
}

TEST_F(StorageServiceTest, HeartbeatsFlowWithTheSegmentId) {
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(master_.WaitFor([&] { return master_.heartbeat_count_locked() >= 3; }));
  for (const auto& beat : master_.heartbeats()) {
    EXPECT_EQ(beat.store_id(), store->store_id());
    ASSERT_EQ(beat.segment_ids_size(), 1);
    EXPECT_EQ(beat.segment_ids(0), store->segment_id());
  }
  EXPECT_EQ(master_.mounts().size(), 1u);
  EXPECT_EQ(store->remounts(), 0u);
}

TEST_F(StorageServiceTest, RemountsAfterMaxLeaseWhenTheRejoinIsRefused) {
  master_.max_lease_ms = 300;
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(store->segment_id(), 1u);
  ASSERT_TRUE(RoundTrip(*store, 1, false, "before", 0).ok());

  master_.Drop(1);
  ASSERT_TRUE(master_.WaitFor([&] { return master_.mount_count_locked() >= 2; }));
  // Invariant 3: no remount before max_lease_ms has passed since the store learnt of the drop.
  auto mounts = master_.mounts();
  EXPECT_GE(mounts[1].at - master_.drop_reported_at(), 300ms);
  EXPECT_EQ(mounts[1].endpoint.store_id(), store->store_id());

  const auto deadline = steady_clock::now() + kPatience;
  // The store takes its new id before it counts the remount: wait for both.
  while ((store->segment_id() != 2 || store->remounts() == 0) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(store->segment_id(), 2u);
  EXPECT_EQ(store->remounts(), 1u);
  EXPECT_EQ(master_.refused_rejoins(), 1);
  EXPECT_EQ(store->rejoins(), 0u);

  // The old id is refused; the new one serves the same memory.
  Status stale = RoundTrip(*store, 1, false, "x", 0);
  EXPECT_EQ(stale.code(), StatusCode::kStale) << stale.ToString();
  EXPECT_TRUE(RoundTrip(*store, 2, false, "after", 0).ok());
  EXPECT_TRUE(RoundTrip(*store, 2, true, "after shm", 64).ok());

  // Heartbeats continue under the new id.
  const size_t seen = master_.heartbeats().size();
  ASSERT_TRUE(master_.WaitFor([&] { return master_.heartbeat_count_locked() >= seen + 2; }));
  EXPECT_EQ(master_.heartbeats().back().segment_ids(0), 2u);
}

TEST_F(StorageServiceTest, KeepsBeatingThroughAMasterOutage) {
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  master_.set_fail_heartbeats(true);
  ASSERT_TRUE(master_.WaitFor([&] { return master_.failed_heartbeats_locked() >= 5; }));
  const size_t before = master_.heartbeats().size();
  master_.set_fail_heartbeats(false);
  ASSERT_TRUE(master_.WaitFor([&] { return master_.heartbeat_count_locked() >= before + 3; }));
  EXPECT_EQ(store->segment_id(), 1u);  // an unanswered beat is not a drop
  EXPECT_EQ(master_.mounts().size(), 1u);
}

TEST_F(StorageServiceTest, UnreachableMasterIsAClearErrorWithinTheTimeout) {
  StorageOptions o = Options();
  const RefusingPort refusing;
  o.master_address = "127.0.0.1:" + std::to_string(refusing.port());
  o.rpc_timeout = 500ms;
  const auto start = steady_clock::now();
  auto store = StorageService::Start(o);
  ASSERT_FALSE(store.ok());
  EXPECT_LT(steady_clock::now() - start, kPatience);
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find(o.master_address), std::string::npos)
      << store.status().ToString();
  EXPECT_NE(store.status().message().find("unreachable"), std::string::npos)
      << store.status().ToString();
  // Nothing left behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(StorageServiceTest, RefusedMountIsTheMastersError) {
  master_.set_refuse_mounts(true);
  auto store = StorageService::Start(Options());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNoSpace) << store.status().ToString();
  EXPECT_NE(store.status().message().find("test master is full"), std::string::npos);
}

TEST_F(StorageServiceTest, StopUnmountsAndRemovesTheSocket) {
  auto store = StartStore(Options());
  ASSERT_NE(store, nullptr);
  const std::string socket = store->shm_socket_path();
  ASSERT_TRUE(std::filesystem::exists(socket));
  store->Stop();
  EXPECT_EQ(master_.unmounts(), std::vector<uint64_t>{1});
  EXPECT_FALSE(std::filesystem::exists(socket));
  EXPECT_EQ(store->segment_id(), 0u);
  const size_t beats = master_.heartbeats().size();
  store->Stop();  // idempotent
  store.reset();  // and the destructor after it
  EXPECT_EQ(master_.unmounts().size(), 1u);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(master_.heartbeats().size(), beats);  // no beats after Stop
}

TEST_F(StorageServiceTest, StopDoesNotHangWhenTheMasterIsGone) {
  StorageOptions o = Options();
  o.rpc_timeout = 500ms;
  auto store = StartStore(o);
  ASSERT_NE(store, nullptr);
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  const auto start = steady_clock::now();
  store->Stop();
  EXPECT_LT(steady_clock::now() - start, kPatience);
  EXPECT_FALSE(std::filesystem::exists(store->shm_socket_path()));
}

TEST_F(StorageServiceTest, RejectsBadOptions) {
  StorageOptions no_master = Options();
  no_master.master_address = "";
  EXPECT_EQ(StorageService::Start(no_master).status().code(), StatusCode::kInvalidArgument);

  StorageOptions no_memory = Options();
  no_memory.memory_bytes = 0;
  EXPECT_EQ(StorageService::Start(no_memory).status().code(), StatusCode::kInvalidArgument);

  StorageOptions bad_id = Options();
  bad_id.store_id = "../escape";
  EXPECT_EQ(StorageService::Start(bad_id).status().code(), StatusCode::kInvalidArgument);

  StorageOptions bad_listen = Options();
  bad_listen.tcp_listen = "nonsense";
  EXPECT_EQ(StorageService::Start(bad_listen).status().code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(master_.mounts().empty());
}

}  // namespace
}  // namespace kvpool::store
