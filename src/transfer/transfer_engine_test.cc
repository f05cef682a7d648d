// Round trips through real SegmentServers over real sockets and memfds: shm, tcp
// (allow_shm=false forces tcp on one host), and where UCX is built, ucx over UCX's tcp
// (on loopback) and over its shared-memory transports.
#include "transfer/transfer_engine.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "common/checksum.h"
#include "common/clock.h"
#include "transfer/auth_handshake.h"
#include "transfer/segment_server.h"
#include "transfer/unique_fd.h"
#include "transfer/wire_bytes.h"
#include "transfer/memfd_region.h"

namespace kvpool::transfer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSegment = 7;
constexpr uint64_t kSegmentSize = 48 << 20;

Clock::time_point Soon() { return Clock::now() + std::chrono::seconds(30); }

std::vector<char> RandomBytes(size_t n, uint64_t seed) {
  std::vector<char> out(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<char>(rng());
  return out;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvpool-transfer-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_; }

 private:
  std::string path_;
};

constexpr uint64_t kTierSize = (8 << 20) + 4096;

// The UCX settings a transport under test names: "ucx_tcp" (UCX's tcp on loopback) or
// "ucx_sm" (its shared-memory transports); not enabled for "shm" and "tcp".
UcxSettings UcxFor(std::string_view transport) {
  if (transport == "ucx_tcp") return {true, "tcp", "lo"};
  if (transport == "ucx_sm") return {true, "sm", ""};
  return {};
}

// shm and tcp, and the two UCX ones where UCX is built.
std::vector<const char*> TransportsUnderTest() {
  std::vector<const char*> all = {"shm", "tcp"};
  if (UcxBuilt()) all.insert(all.end(), {"ucx_tcp", "ucx_sm"});
  return all;
}

TransferOptions ClientOptions(std::string_view transport) {
  TransferOptions options;
  options.allow_shm = transport == "shm";
  options.ucx = UcxFor(transport);
  return options;
}

// One store: a memfd segment served over tcp and shm (and UCX when `ucx` enables it), and an
// SSD tier file of random bytes (opened O_DIRECT where the filesystem takes it, as the
// store's tier is).
class StoreFixture {
 public:
  explicit StoreFixture(std::optional<SharedSecret> secret = {}, UcxSettings ucx = {}) {
    region = std::move(MemfdRegion::Create(kSegmentSize).value());
    tier_bytes = RandomBytes(kTierSize, 99);
    const std::string tier_path = dir.path() + "/tier";
    {
      UniqueFd writer(::open(tier_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
      EXPECT_EQ(::pwrite(writer.get(), tier_bytes.data(), kTierSize, 0), static_cast<ssize_t>(kTierSize));
    }
    tier.Reset(::open(tier_path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    if (!tier.valid()) tier.Reset(::open(tier_path.c_str(), O_RDONLY | O_CLOEXEC));
    SegmentServerOptions options;
    options.shm_socket_path = dir.path() + "/store.sock";
    options.secret = std::move(secret);
    options.ucx = std::move(ucx);
    server = std::move(SegmentServer::Start(options).value());
    server->Serve({kSegment, region->data(), region->size(), region->memfd(), tier.get(), kTierSize});
  }
  SegmentEndpoint Endpoint(uint64_t id, uint64_t size) const {
    return {id, "store-a", LocalHostId(), server->tcp_address(), server->shm_socket_path(), size};
  }

  TempDir dir;
  std::unique_ptr<MemfdRegion> region;
  std::vector<char> tier_bytes;
  UniqueFd tier;
  std::unique_ptr<SegmentServer> server;
};

class TransferRoundTripTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    engine_ = std::make_unique<TransferEngine>(ClientOptions(GetParam()));
    ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(kSegment, kSegmentSize)).ok());
    ASSERT_EQ(engine_->TransportFor(kSegment), ucx() ? "ucx" : GetParam());
  }

  bool ucx() const { return UcxFor(GetParam()).enabled; }

  Status Move(OpKind kind, void* local, uint64_t segment, uint64_t offset, uint64_t length) {
    TransferRequest r{kind, local, segment, offset, length};
    return engine_->Transfer({&r, 1}, Soon());
  }

  StoreFixture store_{{}, UcxFor(GetParam())};
  std::unique_ptr<TransferEngine> engine_;
};

TEST_P(TransferRoundTripTest, RoundTripsEverySize) {
  std::mt19937_64 rng(1);
  for (uint64_t size : {uint64_t{1}, uint64_t{3}, uint64_t{4096}, uint64_t{65537}, uint64_t{1} << 20,
                        (uint64_t{4} << 20) + 1, uint64_t{16} << 20}) {
    SCOPED_TRACE(size);
    std::vector<char> source = RandomBytes(size, size);
    uint64_t offset = rng() % (kSegmentSize - size + 1);
    ASSERT_TRUE(Move(OpKind::kWrite, source.data(), kSegment, offset, size).ok());
    // The bytes are in the store's memory...
    ASSERT_EQ(std::memcmp(store_.region->data() + offset, source.data(), size), 0);
    // ...and come back.
    std::vector<char> back(size, '\xAB');
    ASSERT_TRUE(Move(OpKind::kRead, back.data(), kSegment, offset, size).ok());
    ASSERT_EQ(std::memcmp(back.data(), source.data(), size), 0);
  }
}

// Reads of the store's SSD tier file (TransferRequest::from_tier) at any offset and length,
// hashed or not, in one batch with a segment read; a range past the file, a tier write and a
// segment served without a tier are refused alone.
TEST_P(TransferRoundTripTest, TierReadsComeFromTheStoresFile) {
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {0, 1}, {4095, 2}, {4096 + 7, (4 << 20) + 3}, {1 << 20, 1 << 20}, {kTierSize - 5, 5}};
  std::vector<std::vector<char>> backs;
  std::vector<uint64_t> sums(ranges.size(), 0);
  std::vector<TransferRequest> reads;
  for (size_t i = 0; i < ranges.size(); ++i) backs.emplace_back(ranges[i].second);
  for (size_t i = 0; i < ranges.size(); ++i) {
    TransferRequest r{OpKind::kRead, backs[i].data(), kSegment, ranges[i].first, ranges[i].second};
    r.from_tier = true;
    if (i % 2 == 0) r.checksum = &sums[i];
    reads.push_back(r);
  }
  std::vector<char> segment_back(4096);
  reads.push_back({OpKind::kRead, segment_back.data(), kSegment, 0, segment_back.size()});
  std::vector<Status> results;
  ASSERT_TRUE(engine_->Transfer(reads, Soon(), &results).ok());
  for (size_t i = 0; i < ranges.size(); ++i) {
    SCOPED_TRACE(i);
    const char* expected = store_.tier_bytes.data() + ranges[i].first;
    EXPECT_EQ(std::memcmp(backs[i].data(), expected, ranges[i].second), 0);
    if (i % 2 == 0) EXPECT_EQ(sums[i], Checksum(expected, ranges[i].second));
  }
  EXPECT_EQ(std::memcmp(segment_back.data(), store_.region->data(), segment_back.size()), 0);

  std::vector<char> buffer(8192);
  TransferRequest past{OpKind::kRead, buffer.data(), kSegment, kTierSize - 4096, 8192};
  past.from_tier = true;
  TransferRequest write{OpKind::kWrite, buffer.data(), kSegment, 0, 4096};
  write.from_tier = true;
  for (const TransferRequest& r : {past, write}) {
    EXPECT_EQ(engine_->Transfer({&r, 1}, Soon()).code(), StatusCode::kInvalidArgument);
  }
  // Served again without a tier (a store whose tier is gone): its tier reads are refused.
  store_.server->Serve({kSegment, store_.region->data(), store_.region->size(), store_.region->memfd()});
  TransferRequest first{OpKind::kRead, buffer.data(), kSegment, 0, 4096};
  first.from_tier = true;
  EXPECT_EQ(engine_->Transfer({&first, 1}, Soon()).code(), StatusCode::kInvalidArgument);
}

// A read asked to hash its bytes lands them and their Checksum(), in one batch with reads
// that do not hash (those are still cut among threads or frames).
TEST_P(TransferRoundTripTest, ReadsHashTheBytesAsTheyLand) {
  const std::vector<uint64_t> sizes = {0, 1, 65537, uint64_t{1} << 20, (uint64_t{3} << 20) + 5, uint64_t{20} << 20};
  std::vector<std::vector<char>> sources, backs;
  std::vector<TransferRequest> writes, reads;
  std::vector<uint64_t> sums(sizes.size(), 0xdead);
  uint64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sources.push_back(RandomBytes(sizes[i], 40 + i));
    backs.emplace_back(sizes[i]);
    writes.push_back({OpKind::kWrite, sources[i].data(), kSegment, offset, sizes[i]});
    TransferRequest read{OpKind::kRead, backs[i].data(), kSegment, offset, sizes[i]};
    read.checksum = &sums[i];
    reads.push_back(read);
    offset += sizes[i];
  }
  std::vector<char> plain(uint64_t{8} << 20);
  reads.push_back({OpKind::kRead, plain.data(), kSegment, 0, plain.size()});  // not hashed
  ASSERT_TRUE(engine_->Transfer(writes, Soon()).ok());
  std::vector<Status> results;
  ASSERT_TRUE(engine_->Transfer(reads, Soon(), &results).ok()) << results.back().ToString();
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(sizes[i]);
    EXPECT_EQ(backs[i], sources[i]);
    EXPECT_EQ(sums[i], Checksum(sources[i].data(), sources[i].size()));
  }
  EXPECT_EQ(std::memcmp(plain.data(), store_.region->data(), plain.size()), 0);
}

// Only reads hash, and only up to kMaxHashedReadBytes (tcp sends a hashed read as one frame).
TEST_P(TransferRoundTripTest, AHashedWriteOrOverlongHashedReadIsRefused) {
  std::vector<char> buf(16);
  uint64_t sum = 0;
  TransferRequest write{OpKind::kWrite, buf.data(), kSegment, 0, buf.size()};
  write.checksum = &sum;
  TransferRequest overlong{OpKind::kRead, buf.data(), kSegment, 0, kMaxHashedReadBytes + 1};
  overlong.checksum = &sum;
  for (const TransferRequest& r : {write, overlong}) {
    const Status s = engine_->Transfer({&r, 1}, Soon());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("hashed"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(sum, 0u);
}

TEST_P(TransferRoundTripTest, ManyBatchesFromSeveralThreads) {
  constexpr int kThreads = 4;
  constexpr uint64_t kSlice = kSegmentSize / kThreads;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int round = 0; round < 15; ++round) {
        std::vector<TransferRequest> writes, reads;
        std::vector<std::vector<char>> sources, backs;
        uint64_t offset = t * kSlice;
        for (int i = 0; i < 8; ++i) {
          uint64_t len = 1 + rng() % (1 << 20);
          sources.push_back(RandomBytes(len, rng()));
          backs.emplace_back(len);
          writes.push_back({OpKind::kWrite, sources.back().data(), kSegment, offset, len});
          reads.push_back({OpKind::kRead, backs.back().data(), kSegment, offset, len});
          offset += len;
        }
        if (!engine_->Transfer(writes, Soon()).ok() || !engine_->Transfer(reads, Soon()).ok()) {
          failures++;
          return;
        }
        for (int i = 0; i < 8; ++i) {
          if (backs[i] != sources[i]) failures++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(TransferRoundTripTest, BadRequestsFailAloneAndTheRestSucceed) {
  auto other = MemfdRegion::Create(1 << 20).value();
  store_.server->Serve({8, other->data(), other->size(), other->memfd()});
  ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(8, other->size())).ok());
  store_.server->Withdraw(8);

  std::vector<char> a = RandomBytes(100000, 1), b = RandomBytes(5000, 2), scratch(4096);
  std::vector<TransferRequest> batch = {
      {OpKind::kWrite, a.data(), kSegment, 0, a.size()},
      {OpKind::kWrite, scratch.data(), kSegment, kSegmentSize - 10, scratch.size()},  // out of bounds
      {OpKind::kRead, scratch.data(), 999, 0, scratch.size()},                          // never opened
      {OpKind::kWrite, b.data(), kSegment, 200000, b.size()},
      {OpKind::kRead, scratch.data(), 8, 0, scratch.size()},                            // withdrawn
  };
  std::vector<Status> results;
  Status overall = engine_->Transfer(batch, Soon(), &results);
  EXPECT_FALSE(overall.ok());
  ASSERT_EQ(results.size(), 5u);
  EXPECT_TRUE(results[0].ok()) << results[0].ToString();
  EXPECT_EQ(results[1].code(), StatusCode::kInvalidArgument) << results[1].ToString();
  EXPECT_EQ(results[2].code(), StatusCode::kStale) << results[2].ToString();
  EXPECT_TRUE(results[3].ok()) << results[3].ToString();
  // One-sided UCX cannot see a withdrawal (README.md, "UCX"); the others answer STALE.
  if (!ucx()) EXPECT_EQ(results[4].code(), StatusCode::kStale) << results[4].ToString();
  EXPECT_EQ(std::memcmp(store_.region->data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(store_.region->data() + 200000, b.data(), b.size()), 0);
}

TEST_P(TransferRoundTripTest, FarSideChecksBoundsWhenTheEndpointSizeIsUnknown) {
  engine_->CloseSegment(kSegment);
  ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(kSegment, 0)).ok());
  std::vector<char> buf(8192);
  EXPECT_EQ(Move(OpKind::kRead, buf.data(), kSegment, kSegmentSize - 4096, buf.size()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Move(OpKind::kWrite, buf.data(), kSegment, kSegmentSize + 1, 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(Move(OpKind::kRead, buf.data(), kSegment, kSegmentSize - 8192, buf.size()).ok());
}

TEST_P(TransferRoundTripTest, WithdrawnSegmentIsStaleUntilServedAgain) {
  auto first = MemfdRegion::Create(1 << 20).value();
  FillPattern(first->data(), 0, first->size(), 1);
  store_.server->Serve({9, first->data(), first->size(), first->memfd()});
  ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(9, first->size())).ok());
  std::vector<char> buf(300000), expected(buf.size());
  ASSERT_TRUE(Move(OpKind::kRead, buf.data(), 9, 0, buf.size()).ok());
  FillPattern(expected.data(), 0, expected.size(), 1);
  EXPECT_EQ(buf, expected);

  store_.server->Withdraw(9);
  if (!ucx()) {  // one-sided UCX cannot see a withdrawal (README.md, "UCX")
    EXPECT_EQ(Move(OpKind::kRead, buf.data(), 9, 0, buf.size()).code(), StatusCode::kStale);
    EXPECT_EQ(Move(OpKind::kWrite, buf.data(), 9, 0, 10).code(), StatusCode::kStale);
  }

  // The store serves the id again from other memory; reopening the segment picks it up.
  auto second = MemfdRegion::Create(1 << 20).value();
  FillPattern(second->data(), 0, second->size(), 2);
  store_.server->Serve({9, second->data(), second->size(), second->memfd()});
  engine_->CloseSegment(9);
  ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(9, second->size())).ok());
  Status again = Move(OpKind::kRead, buf.data(), 9, 0, buf.size());
  ASSERT_TRUE(again.ok()) << again.ToString();
  FillPattern(expected.data(), 0, expected.size(), 2);
  EXPECT_EQ(buf, expected);
}

TEST_P(TransferRoundTripTest, ReplacedSegmentIsFollowedWithoutReopening) {
  if (ucx()) GTEST_SKIP() << "a UCX client holds the first memory's key until it opens the segment again";
  auto first = MemfdRegion::Create(1 << 20).value();
  FillPattern(first->data(), 0, first->size(), 3);
  store_.server->Serve({10, first->data(), first->size(), first->memfd()});
  ASSERT_TRUE(engine_->OpenSegment(store_.Endpoint(10, first->size())).ok());
  std::vector<char> buf(4096), expected(4096);
  ASSERT_TRUE(Move(OpKind::kRead, buf.data(), 10, 0, buf.size()).ok());

  auto second = MemfdRegion::Create(1 << 20).value();
  FillPattern(second->data(), 0, second->size(), 4);
  store_.server->Serve({10, second->data(), second->size(), second->memfd()});  // replaces
  ASSERT_TRUE(Move(OpKind::kRead, buf.data(), 10, 0, buf.size()).ok());
  FillPattern(expected.data(), 0, expected.size(), 4);
  EXPECT_EQ(buf, expected);
}

TEST_P(TransferRoundTripTest, ZeroLengthSucceedsAndNullBufferFails) {
  std::vector<Status> results;
  std::vector<TransferRequest> batch = {{OpKind::kRead, nullptr, kSegment, 0, 0},
                                        {OpKind::kRead, nullptr, kSegment, 0, 10}};
  EXPECT_FALSE(engine_->Transfer(batch, Soon(), &results).ok());
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].code(), StatusCode::kInvalidArgument);
}

TEST_P(TransferRoundTripTest, ClosedSegmentIsStale) {
  engine_->CloseSegment(kSegment);
  char byte;
  EXPECT_EQ(Move(OpKind::kRead, &byte, kSegment, 0, 1).code(), StatusCode::kStale);
  EXPECT_EQ(engine_->TransportFor(kSegment), "");
}

TEST_P(TransferRoundTripTest, SubmitThenPollThenWait) {
  std::vector<char> buf(2 << 20);
  TransferRequest r{OpKind::kRead, buf.data(), kSegment, 0, buf.size()};
  auto batch = engine_->Submit({&r, 1});
  while (!batch->Done()) std::this_thread::yield();
  EXPECT_TRUE(batch->Wait(Soon()).ok());
  ASSERT_EQ(batch->results().size(), 1u);
  EXPECT_TRUE(batch->results()[0].ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, TransferRoundTripTest, ::testing::ValuesIn(TransportsUnderTest()),
                         [](const auto& info) { return std::string(info.param); });

// --auth-file: a store with the pool's secret serves only clients that prove it, on shm and tcp
// alike; every other client gets UNAUTHENTICATED, saying why, and nothing hangs.
class TransferAuthTest : public ::testing::TestWithParam<const char*> {
 protected:
  static SharedSecret PoolSecret() { return SharedSecret::FromBytes("the pool's secret, 32 bytes long"); }

  // Writes and reads back 1 MiB through a client holding `secret` (or none) against `store`.
  Status RoundTrip(StoreFixture& store, std::optional<SharedSecret> secret) {
    TransferOptions options = ClientOptions(GetParam());
    options.connect_timeout = std::chrono::milliseconds(500);
    options.secret = std::move(secret);
    TransferEngine engine(options);
    Status opened = engine.OpenSegment(store.Endpoint(kSegment, kSegmentSize));
    if (!opened.ok()) return opened;
    auto bytes = RandomBytes(1 << 20, 5);
    std::vector<char> back(bytes.size());
    TransferRequest write{OpKind::kWrite, bytes.data(), kSegment, 4096, bytes.size()};
    KVPOOL_RETURN_IF_ERROR(engine.Transfer({&write, 1}, Soon()));
    TransferRequest read{OpKind::kRead, back.data(), kSegment, 4096, back.size()};
    KVPOOL_RETURN_IF_ERROR(engine.Transfer({&read, 1}, Soon()));
    EXPECT_EQ(engine.TransportFor(kSegment), UcxFor(GetParam()).enabled ? "ucx" : GetParam());
    return back == bytes ? Status::Ok() : Internal("read back other bytes");
  }
};

TEST_P(TransferAuthTest, TheRightSecretIsServed) {
  StoreFixture store(PoolSecret(), UcxFor(GetParam()));
  Status s = RoundTrip(store, PoolSecret());
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_P(TransferAuthTest, NoSecretOrAnotherIsRefusedWithAReason) {
  StoreFixture store(PoolSecret(), UcxFor(GetParam()));
  Status none = RoundTrip(store, std::nullopt);
  EXPECT_EQ(none.code(), StatusCode::kUnauthenticated) << none.ToString();
  EXPECT_NE(none.message().find("--auth-file"), std::string::npos) << none.ToString();
  Status other = RoundTrip(store, SharedSecret::FromBytes("another pool's secret, as long.."));
  EXPECT_EQ(other.code(), StatusCode::kUnauthenticated) << other.ToString();
  EXPECT_NE(other.message().find("another secret"), std::string::npos) << other.ToString();
  // The store serves on after refusing them.
  Status good = RoundTrip(store, PoolSecret());
  EXPECT_TRUE(good.ok()) << good.ToString();
}

TEST_P(TransferAuthTest, AClientWithASecretTrustsNoStoreThatDoesNotAsk) {
  StoreFixture open_store({}, UcxFor(GetParam()));
  Status s = RoundTrip(open_store, PoolSecret());
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("did not ask"), std::string::npos) << s.ToString();
}

// A tenant (common/tenant_claim.h) is served on tcp only, and only inside the master's grants:
// its key proves who it is, the grant what it may touch. (UCX is on at both ends where built:
// a tenant is still never given a one-sided route.)
TEST(TenantTransferTest, ATenantReachesOnlyTheRangesItWasGranted) {
  const SharedSecret pool = SharedSecret::FromBytes("the pool's secret, 32 bytes long");
  const UcxSettings ucx = UcxBuilt() ? UcxFor("ucx_tcp") : UcxSettings{};
  StoreFixture store(pool, ucx);
  TransferOptions options;
  options.ucx = ucx;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.secret = pool.ForTenant(TenantClaim::Parse("team-a:ns-a").value());
  TransferEngine engine(options);  // may use shm (same host), but a tenant never maps a segment
  ASSERT_TRUE(engine.OpenSegment(store.Endpoint(kSegment, kSegmentSize)).ok());
  EXPECT_EQ(engine.TransportFor(kSegment), "tcp");

  const int64_t later = WallClockMs() + 60'000;
  auto bytes = RandomBytes(256 << 10, 7);
  std::vector<char> back(bytes.size());
  const auto write_grant = IssueGrant(pool, GrantOp::kWrite, kSegment, 8192, bytes.size(), later);
  const auto read_grant = IssueGrant(pool, GrantOp::kRead, kSegment, 8192, bytes.size(), later);
  TransferRequest write{OpKind::kWrite, bytes.data(), kSegment, 8192, bytes.size(), write_grant};
  ASSERT_TRUE(engine.Transfer({&write, 1}, Soon()).ok());
  TransferRequest read{OpKind::kRead, back.data(), kSegment, 8192, back.size(), read_grant};
  ASSERT_TRUE(engine.Transfer({&read, 1}, Soon()).ok());
  EXPECT_EQ(back, bytes);

  // No grant, a grant for the other op, a range beyond the grant, an expired grant, one the
  // tenant forged with its own key: each PERMISSION_DENIED, and the connection serves on.
  const std::vector<std::pair<const char*, AccessGrant>> refused = {
      {"none", AccessGrant{}},
      {"a write grant for a read", write_grant},
      {"a grant of the first 4 KiB only", IssueGrant(pool, GrantOp::kRead, kSegment, 8192, 4096, later)},
      {"expired", IssueGrant(pool, GrantOp::kRead, kSegment, 8192, bytes.size(), WallClockMs() - 10'000)},
      {"forged with the tenant's own key", IssueGrant(*options.secret, GrantOp::kRead, kSegment, 8192, bytes.size(), later)},
  };
  for (const auto& [why, grant] : refused) {
    TransferRequest r{OpKind::kRead, back.data(), kSegment, 8192, back.size(), grant};
    const Status s = engine.Transfer({&r, 1}, Soon());
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << why << ": " << s.ToString();
  }
  ASSERT_TRUE(engine.Transfer({&read, 1}, Soon()).ok());

  // The SSD tier's file is another space: a segment grant does not open the same range of it.
  TransferRequest tier_read{OpKind::kRead, back.data(), kSegment, 8192, back.size(), read_grant};
  tier_read.from_tier = true;
  EXPECT_EQ(engine.Transfer({&tier_read, 1}, Soon()).code(), StatusCode::kPermissionDenied);
  tier_read.grant = IssueGrant(pool, GrantOp::kReadTier, kSegment, 8192, back.size(), later);
  ASSERT_TRUE(engine.Transfer({&tier_read, 1}, Soon()).ok());
  EXPECT_EQ(std::memcmp(back.data(), store.tier_bytes.data() + 8192, back.size()), 0);

  // The shm socket refuses a tenant outright: a mapped segment is every namespace's bytes.
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = store.Endpoint(kSegment, kSegmentSize).shm_socket;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_TRUE(ProveSecret(fd.get(), *options.secret, kShmPurpose, "store", Soon()).ok());
  uint8_t reply[64];
  const ssize_t n = ::recv(fd.get(), reply, sizeof(reply), 0);
  ASSERT_GE(n, 8);
  EXPECT_EQ(GetField<uint16_t>(reply, 6), static_cast<uint16_t>(StatusCode::kUnauthenticated));
}

INSTANTIATE_TEST_SUITE_P(Transports, TransferAuthTest, ::testing::ValuesIn(TransportsUnderTest()),
                         [](const auto& info) { return std::string(info.param); });

TEST(TransportChoiceTest, OtherHostsAndMissingShmSocketsUseTcp) {
  StoreFixture store;
  TransferEngine engine;
  SegmentEndpoint here = store.Endpoint(kSegment, kSegmentSize);
  ASSERT_TRUE(engine.OpenSegment(here).ok());
  EXPECT_EQ(engine.TransportFor(kSegment), "shm");

  SegmentEndpoint elsewhere = here;
  elsewhere.host_id = "some-other-host";
  ASSERT_TRUE(engine.OpenSegment(elsewhere).ok());
  EXPECT_EQ(engine.TransportFor(kSegment), "tcp");

  SegmentEndpoint no_socket = here;
  no_socket.shm_socket = store.dir.path() + "/nobody-listens.sock";
  ASSERT_TRUE(engine.OpenSegment(no_socket).ok());
  EXPECT_EQ(engine.TransportFor(kSegment), "tcp");

  std::vector<char> buf(1000);
  TransferRequest r{OpKind::kRead, buf.data(), kSegment, 0, buf.size()};
  EXPECT_TRUE(engine.Transfer({&r, 1}, Soon()).ok());
}

TEST(TransportChoiceTest, NoReachableAddressFailsToOpen) {
  TransferEngine engine;
  SegmentEndpoint nowhere{1, "store", "other-host", "", "", 100};
  EXPECT_FALSE(engine.OpenSegment(nowhere).ok());
  nowhere.tcp_address = "not-an-address";
  EXPECT_FALSE(engine.OpenSegment(nowhere).ok());
}

TEST(LocalHostIdTest, StableAndOverridable) {
  ::unsetenv("KVPOOL_HOST_ID");
  std::string id = LocalHostId();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id, LocalHostId());
  ::setenv("KVPOOL_HOST_ID", "simulated-host-2", 1);
  EXPECT_EQ(LocalHostId(), "simulated-host-2");
  ::unsetenv("KVPOOL_HOST_ID");
  EXPECT_EQ(LocalHostId(), id);
}

// A peer that accepts connections (the kernel does, into the backlog) but never answers.
TEST(DeadlineTest, WaitWithAPastDeadlineReturnsTimeout) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);

  TransferEngine engine;
  ASSERT_TRUE(engine.OpenSegment({1, "silent", "other-host", "127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), "", 1 << 20}).ok());
  std::vector<char> buf(1 << 20, 'x');
  std::vector<TransferRequest> batch = {{OpKind::kRead, buf.data(), 1, 0, 4096},
                                        {OpKind::kWrite, buf.data(), 1, 0, buf.size()}};
  auto submitted = engine.Submit(batch);
  EXPECT_EQ(submitted->Wait(Clock::now() - std::chrono::milliseconds(1)).code(), StatusCode::kTimeout);
  ASSERT_EQ(submitted->results().size(), 2u);
  EXPECT_EQ(submitted->results()[0].code(), StatusCode::kTimeout);
  EXPECT_EQ(submitted->results()[1].code(), StatusCode::kTimeout);

  // A short real deadline behaves the same, and returns.
  auto second = engine.Submit(batch);
  EXPECT_EQ(second->Wait(Clock::now() + std::chrono::milliseconds(50)).code(), StatusCode::kTimeout);
  ::close(listener);
}

}  // namespace
}  // namespace kvpool::transfer
