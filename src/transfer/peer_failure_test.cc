// A segment server in a separate process that is stopped or killed mid-transfer: requests
// turn into errors within their deadline (never a hang or a crash), and once a server is
// back on the same address the engine reconnects by itself.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "transfer/memfd_region.h"
#include "transfer/transfer_engine.h"

extern char** environ;

namespace kvpool::transfer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSegment = 11;
constexpr uint64_t kSize = 64 << 20;

// transfer_test_server running in a child process.
class ChildServer {
 public:
  // port 0 picks a free one; address() tells which. `ucx`: it serves UCX too (over tcp on lo).
  ChildServer(int port, uint64_t seed, bool ucx = false) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::string port_arg = std::to_string(port), id = std::to_string(kSegment),
                size = std::to_string(kSize), seed_arg = std::to_string(seed);
    const char* argv[] = {KVPOOL_TRANSFER_TEST_SERVER, port_arg.c_str(), id.c_str(), size.c_str(),
                          seed_arg.c_str(), ucx ? "ucx" : nullptr, nullptr};
    EXPECT_EQ(::posix_spawn(&pid_, KVPOOL_TRANSFER_TEST_SERVER, &actions, nullptr,
                            const_cast<char**>(argv), environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    FILE* in = ::fdopen(out[0], "r");
    char line[256] = {};
    while (std::fgets(line, sizeof(line), in) != nullptr) {  // (log lines may come first)
      if (std::strncmp(line, "READY ", 6) != 0) continue;
      address_ = std::string(line + 6);
      while (!address_.empty() && (address_.back() == '\n' || address_.back() == '\r')) address_.pop_back();
      break;
    }
    std::fclose(in);
    EXPECT_FALSE(address_.empty()) << "child server did not start";
  }
  ~ChildServer() { Kill(); }

  const std::string& address() const { return address_; }
  int port() const { return std::stoi(address_.substr(address_.rfind(':') + 1)); }
  void Signal(int sig) { ::kill(pid_, sig); }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

SegmentEndpoint EndpointOf(const ChildServer& server) {
  return {kSegment, "child", "another-host", server.address(), "", kSize};
}

bool IsPeerFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimeout;
}

// Streams reads of the whole segment from another thread and kills `server` under them once
// one batch has succeeded; returns the status that ended the stream.
Status KillUnderStreamingReads(TransferEngine& engine, ChildServer& server) {
  std::vector<char> buf(16 << 20);
  std::atomic<int> succeeded{0};
  Status failure;
  std::thread reader([&] {
    for (int i = 0; i < 100000; ++i) {
      std::vector<TransferRequest> batch;
      for (uint64_t off = 0; off < kSize; off += buf.size() / 4) {
        batch.push_back({OpKind::kRead, buf.data() + (off % buf.size()), kSegment, off, buf.size() / 4});
      }
      Status s = engine.Transfer(batch, Clock::now() + std::chrono::seconds(20));
      if (!s.ok()) {
        failure = s;
        return;
      }
      succeeded++;
    }
  });
  while (succeeded.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.Kill();
  reader.join();
  return failure;
}

// The segment's first MiB reads back as PatternByte(seed, i) within `attempts` tries (after a
// restart, a connection whose close the io thread has not yet noticed may fail one more).
void ExpectReadsAgain(TransferEngine& engine, uint64_t seed, int attempts) {
  std::vector<char> expected(1 << 20);
  FillPattern(expected.data(), 0, expected.size(), seed);
  std::vector<char> got(expected.size());
  TransferRequest r{OpKind::kRead, got.data(), kSegment, 0, got.size()};
  Status s;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    s = engine.Transfer({&r, 1}, Clock::now() + std::chrono::seconds(20));
    if (s.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, expected);
}

TEST(PeerFailureTest, KilledServerFailsInFlightRequestsAndARestartedOneServes) {
  TransferOptions options;
  options.tcp_stall_timeout = std::chrono::milliseconds(2000);
  TransferEngine engine(options);
  auto server = std::make_unique<ChildServer>(0, /*seed=*/1);
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(*server)).ok());

  const int port = server->port();
  const Status failure = KillUnderStreamingReads(engine, *server);
  EXPECT_TRUE(IsPeerFailure(failure)) << failure.ToString();

  // A new server on the same address: the same engine and endpoint work again.
  server = std::make_unique<ChildServer>(port, /*seed=*/2);
  ASSERT_NO_FATAL_FAILURE(ExpectReadsAgain(engine, /*seed=*/2, /*attempts=*/50));
}

TEST(PeerFailureTest, HungServerTimesOutThenKilledServerFailsFast) {
  TransferOptions options;
  options.tcp_stall_timeout = std::chrono::milliseconds(60000);  // only the kill may end it
  TransferEngine engine(options);
  ChildServer server(0, 3);
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(server)).ok());
  std::vector<char> buf(kSize);
  TransferRequest whole{OpKind::kRead, buf.data(), kSegment, 0, kSize};
  ASSERT_TRUE(engine.Transfer({&whole, 1}, Clock::now() + std::chrono::seconds(20)).ok());

  server.Signal(SIGSTOP);
  auto hung = engine.Submit({&whole, 1});
  EXPECT_EQ(hung->Wait(Clock::now() + std::chrono::milliseconds(200)).code(), StatusCode::kTimeout);

  auto doomed = engine.Submit({&whole, 1});
  server.Kill();
  Status s = doomed->Wait(Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST(PeerFailureTest, StallTimeoutDropsAHungConnection) {
  TransferOptions options;
  options.tcp_stall_timeout = std::chrono::milliseconds(300);
  TransferEngine engine(options);
  ChildServer server(0, 4);
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(server)).ok());
  std::vector<char> buf(kSize);
  TransferRequest whole{OpKind::kRead, buf.data(), kSegment, 0, kSize};
  server.Signal(SIGSTOP);
  Status s = engine.Transfer({&whole, 1}, Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  server.Signal(SIGCONT);
  Status again;
  for (int attempt = 0; attempt < 50 && !(again = engine.Transfer({&whole, 1}, Clock::now() + std::chrono::seconds(20))).ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(again.ok()) << again.ToString();
}

TEST(PeerFailureTest, NobodyListeningFailsWithUnavailable) {
  int port;
  {
    ChildServer server(0, 5);
    port = server.port();
  }  // killed: the port is closed now
  TransferEngine engine;
  ASSERT_TRUE(engine.OpenSegment({kSegment, "gone", "another-host", "127.0.0.1:" + std::to_string(port), "", kSize}).ok());
  char byte;
  TransferRequest r{OpKind::kRead, &byte, kSegment, 0, 1};
  EXPECT_EQ(engine.Transfer({&r, 1}, Clock::now() + std::chrono::seconds(20)).code(), StatusCode::kUnavailable);
}

// Over UCX (its tcp on loopback): a store killed under a stream of one-sided reads fails them
// (never a hang); the segment's later requests go over tcp to the store restarted on the same
// address, and opening the segment again brings UCX back.
TEST(UcxPeerFailureTest, AKilledStoreFailsInFlightReadsThenTcpAndAReopenServe) {
  if (!UcxBuilt()) GTEST_SKIP() << "built without UCX";
  TransferOptions options;
  options.ucx = {true, "tcp", "lo"};
  TransferEngine engine(options);
  auto server = std::make_unique<ChildServer>(0, /*seed=*/1, /*ucx=*/true);
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(*server)).ok());
  ASSERT_EQ(engine.TransportFor(kSegment), "ucx");

  const int port = server->port();
  const Status failure = KillUnderStreamingReads(engine, *server);
  EXPECT_TRUE(IsPeerFailure(failure)) << failure.ToString();

  server = std::make_unique<ChildServer>(port, /*seed=*/2, /*ucx=*/true);
  // Over tcp, which reconnects by itself.
  ASSERT_NO_FATAL_FAILURE(ExpectReadsAgain(engine, /*seed=*/2, /*attempts=*/50));
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(*server)).ok());  // the same endpoint: reopened
  ASSERT_EQ(engine.TransportFor(kSegment), "ucx");
  ASSERT_NO_FATAL_FAILURE(ExpectReadsAgain(engine, /*seed=*/2, /*attempts=*/1));
}

// A stopped store: the batch returns TIMEOUT at its deadline though UCX still holds its
// reads (closing the endpoint cancels them), and the next request goes over tcp.
TEST(UcxPeerFailureTest, AHungStoreTimesOutAtTheDeadline) {
  if (!UcxBuilt()) GTEST_SKIP() << "built without UCX";
  TransferOptions options;
  options.ucx = {true, "tcp", "lo"};
  options.tcp_stall_timeout = std::chrono::milliseconds(60000);
  TransferEngine engine(options);
  ChildServer server(0, 3, /*ucx=*/true);
  ASSERT_TRUE(engine.OpenSegment(EndpointOf(server)).ok());
  ASSERT_EQ(engine.TransportFor(kSegment), "ucx");
  std::vector<char> buf(kSize);
  TransferRequest whole{OpKind::kRead, buf.data(), kSegment, 0, kSize};
  ASSERT_TRUE(engine.Transfer({&whole, 1}, Clock::now() + std::chrono::seconds(20)).ok());

  server.Signal(SIGSTOP);
  auto hung = engine.Submit({&whole, 1});
  EXPECT_EQ(hung->Wait(Clock::now() + std::chrono::milliseconds(200)).code(), StatusCode::kTimeout);
  hung.reset();

  auto doomed = engine.Submit({&whole, 1});  // tcp now: fails once the store dies
  server.Kill();
  Status s = doomed->Wait(Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

}  // namespace
}  // namespace kvpool::transfer
