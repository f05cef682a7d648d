// The server side seen from the wire: hand-built frames, garbage, truncation, Stop().
#include "transfer/segment_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "transfer/socket_util.h"
#include "transfer/tcp_frame.h"
#include "transfer/memfd_region.h"
#include "transfer/transfer_engine.h"

namespace kvpool::transfer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSegment = 3;
constexpr uint64_t kSize = 4 << 20;

UniqueFd Dial(const std::string& address) {
  auto resolved = ResolveTcpAddress(address);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_EQ(::connect(fd.get(), resolved->get(), resolved->length), 0);
  timeval tv{10, 0};  // a broken server fails the test instead of hanging it
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;  // the server may close on us; callers check what follows
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// True once the server has closed its end (EOF or reset), false if it sends anything else.
bool ServerClosed(int fd) {
  char byte;
  ssize_t k = ::recv(fd, &byte, 1, 0);
  return k == 0 || (k < 0 && errno == ECONNRESET);
}

void SendRequest(int fd, FrameOp op, uint64_t id, uint64_t segment, uint64_t offset, uint64_t length) {
  RequestHeader h;
  h.op = op;
  h.request_id = id;
  h.segment_id = segment;
  h.offset = offset;
  h.length = length;
  uint8_t wire[RequestHeader::kSize];
  EncodeRequestHeader(h, wire);
  SendAll(fd, wire, sizeof(wire));
}

ResponseHeader ReadResponse(int fd) {
  uint8_t wire[ResponseHeader::kSize];
  ResponseHeader h;
  h.status = StatusCode::kInternal;
  if (RecvAll(fd, wire, sizeof(wire))) {
    EXPECT_TRUE(DecodeResponseHeader(wire, &h).ok());
  }
  return h;
}

class SegmentServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvpool-server-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    region_ = std::move(MemfdRegion::Create(kSize).value());
    FillPattern(region_->data(), 0, kSize, 5);
    SegmentServerOptions options;
    options.shm_socket_path = dir_ + "/s.sock";
    server_ = std::move(SegmentServer::Start(options).value());
    server_->Serve({kSegment, region_->data(), kSize, region_->memfd()});
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A full engine round trip: the server still serves everyone.
  void ExpectServerStillServes(bool shm) {
    TransferOptions options;
    options.allow_shm = shm;
    TransferEngine engine(options);
    ASSERT_TRUE(engine.OpenSegment({kSegment, "s", LocalHostId(), server_->tcp_address(),
                                    server_->shm_socket_path(), kSize}).ok());
    EXPECT_EQ(engine.TransportFor(kSegment), shm ? "shm" : "tcp");
    std::vector<char> buf(1 << 20), expected(1 << 20);
    TransferRequest r{OpKind::kRead, buf.data(), kSegment, 4096, buf.size()};
    ASSERT_TRUE(engine.Transfer({&r, 1}, Clock::now() + std::chrono::seconds(30)).ok());
    FillPattern(expected.data(), 4096, expected.size(), 5);
    EXPECT_EQ(buf, expected);
  }

  std::string dir_;
  std::unique_ptr<MemfdRegion> region_;
  std::unique_ptr<SegmentServer> server_;
};

TEST_F(SegmentServerTest, AnswersAHandBuiltReadFrame) {
  UniqueFd fd = Dial(server_->tcp_address());
  SendRequest(fd.get(), FrameOp::kRead, 77, kSegment, 100, 16);
  ResponseHeader h = ReadResponse(fd.get());
  EXPECT_EQ(h.status, StatusCode::kOk);
  EXPECT_EQ(h.request_id, 77u);
  ASSERT_EQ(h.length, 16u);
  char bytes[16];
  ASSERT_TRUE(RecvAll(fd.get(), bytes, 16));
  EXPECT_EQ(std::memcmp(bytes, region_->data() + 100, 16), 0);
}

TEST_F(SegmentServerTest, WritesLandAndErrorsKeepTheConnectionUsable) {
  UniqueFd fd = Dial(server_->tcp_address());
  const char payload[] = "hello, segment";
  SendRequest(fd.get(), FrameOp::kWrite, 1, kSegment, 1000, sizeof(payload));
  SendAll(fd.get(), payload, sizeof(payload));
  EXPECT_EQ(ReadResponse(fd.get()).status, StatusCode::kOk);
  EXPECT_EQ(std::memcmp(region_->data() + 1000, payload, sizeof(payload)), 0);

  // Unknown segment: STALE, its payload skipped, the next frame on the connection still served.
  SendRequest(fd.get(), FrameOp::kWrite, 2, 999, 0, sizeof(payload));
  SendAll(fd.get(), payload, sizeof(payload));
  EXPECT_EQ(ReadResponse(fd.get()).status, StatusCode::kStale);
  // Out of bounds: INVALID_ARGUMENT, no payload in the reply.
  SendRequest(fd.get(), FrameOp::kRead, 3, kSegment, kSize - 1, 2);
  ResponseHeader oob = ReadResponse(fd.get());
  EXPECT_EQ(oob.status, StatusCode::kInvalidArgument);
  EXPECT_EQ(oob.length, 0u);
  SendRequest(fd.get(), FrameOp::kRead, 4, kSegment, 1000, sizeof(payload));
  ResponseHeader ok = ReadResponse(fd.get());
  EXPECT_EQ(ok.request_id, 4u);
  ASSERT_EQ(ok.length, sizeof(payload));
  char back[sizeof(payload)];
  ASSERT_TRUE(RecvAll(fd.get(), back, sizeof(back)));
  EXPECT_EQ(std::memcmp(back, payload, sizeof(payload)), 0);
}

TEST_F(SegmentServerTest, GarbageClosesOnlyThatConnection) {
  UniqueFd bystander = Dial(server_->tcp_address());
  UniqueFd attacker = Dial(server_->tcp_address());
  std::mt19937_64 rng(9);
  std::vector<char> garbage(1000);
  for (auto& c : garbage) c = static_cast<char>(rng());
  SendAll(attacker.get(), garbage.data(), garbage.size());
  EXPECT_TRUE(ServerClosed(attacker.get()));

  SendRequest(bystander.get(), FrameOp::kRead, 1, kSegment, 0, 8);
  EXPECT_EQ(ReadResponse(bystander.get()).status, StatusCode::kOk);
  ExpectServerStillServes(/*shm=*/false);
}

TEST_F(SegmentServerTest, OversizedFrameClosesTheConnection) {
  UniqueFd fd = Dial(server_->tcp_address());
  SendRequest(fd.get(), FrameOp::kWrite, 1, kSegment, 0, kMaxFramePayload + 1);
  EXPECT_TRUE(ServerClosed(fd.get()));
  ExpectServerStillServes(false);
}

TEST_F(SegmentServerTest, TruncatedFramesDoNotHurtTheServer) {
  {  // half a header, then hang up
    UniqueFd fd = Dial(server_->tcp_address());
    uint8_t wire[RequestHeader::kSize];
    EncodeRequestHeader(RequestHeader{}, wire);
    SendAll(fd.get(), wire, 20);
  }
  {  // a write announcing 1 MiB that brings 100 bytes, then hangs up
    UniqueFd fd = Dial(server_->tcp_address());
    SendRequest(fd.get(), FrameOp::kWrite, 1, kSegment, 0, 1 << 20);
    char some[100] = {};
    SendAll(fd.get(), some, sizeof(some));
  }
  {  // a peer that stalls mid-header stays open but blocks nobody else
    UniqueFd stalled = Dial(server_->tcp_address());
    SendAll(stalled.get(), "KVPT", 4);
    ExpectServerStillServes(false);
  }
  ExpectServerStillServes(false);
  ExpectServerStillServes(true);
}

TEST_F(SegmentServerTest, GarbageOnTheShmSocketIsIgnored) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, server_->shm_socket_path().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  SendAll(fd.get(), "nonsense", 8);
  fd.Reset();
  ExpectServerStillServes(true);
}

TEST_F(SegmentServerTest, StopFailsLaterRequestsAndIsIdempotent) {
  TransferOptions options;
  options.allow_shm = false;
  TransferEngine engine(options);
  ASSERT_TRUE(engine.OpenSegment({kSegment, "s", "other", server_->tcp_address(), "", kSize}).ok());
  std::vector<char> buf(4096);
  TransferRequest r{OpKind::kRead, buf.data(), kSegment, 0, buf.size()};
  ASSERT_TRUE(engine.Transfer({&r, 1}, Clock::now() + std::chrono::seconds(30)).ok());
  server_->Stop();
  server_->Stop();
  Status after = engine.Transfer({&r, 1}, Clock::now() + std::chrono::seconds(30));
  EXPECT_EQ(after.code(), StatusCode::kUnavailable) << after.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/s.sock"));
}

TEST(SegmentServerStartTest, BadListenAddressFails) {
  SegmentServerOptions options;
  options.tcp_listen = "bogus";
  EXPECT_FALSE(SegmentServer::Start(options).ok());
}

}  // namespace
}  // namespace kvpool::transfer
