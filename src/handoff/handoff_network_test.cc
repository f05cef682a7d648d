// The handoff between processes or hosts: HandoffSender (prefill ranks) -> HandoffReceiver
// (decode) over real sockets on loopback, with the landing segment reached over shm (same host)
// and over tcp (what another host uses; here the receiver offers no shm socket).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <random>
#include <thread>

#include "handoff/handoff_control.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/handoff_receiver.h"
#include "handoff/handoff_sender.h"
#include "handoff/test_handoff_caches.h"
#include "transfer/socket_util.h"

namespace kvpool::handoff {
namespace {

using namespace std::chrono_literals;
using testing::HostScenario;
using Clock = std::chrono::steady_clock;

std::vector<DecodeTarget> Targets(const HostScenario& s) {
  std::vector<DecodeTarget> targets;
  for (size_t d = 0; d < s.decode.size(); ++d) targets.push_back({&s.decode[d].cache(), s.decode_tables[d]});
  return targets;
}

// Every prefill rank sends its part from its own thread, as PP GPUs would.
std::vector<Status> SendAllRanks(const std::string& address, const HostScenario& s, uint64_t request_id,
                                 HandoffSenderOptions options = {}) {
  const uint32_t ranks = s.c.prefill.num_ranks();
  std::vector<Status> results(ranks);
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < ranks; ++p) {
    threads.emplace_back([&, p] {
      auto sender = HandoffSender::Connect(address, s.c.prefill, s.c.decode, p, options);
      if (!sender.ok()) {
        results[p] = sender.status();
        return;
      }
      results[p] = (*sender)->Send(request_id, s.c.first_token, s.c.end_token, s.prefill[p].cache(),
                                   s.prefill_tables[p], Clock::now() + 20s);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class HandoffNetworkTest : public ::testing::TestWithParam<bool> {  // param: tcp only
 protected:
  HandoffReceiverOptions Options() const {
    HandoffReceiverOptions o;
    if (GetParam()) o.shm_socket_dir = "";
    return o;
  }
};

TEST_P(HandoffNetworkTest, RandomLayoutsLandExactlyWhereTheDefinitionSays) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 12; ++round) {
    testing::RandomCase c = testing::MakeRandomCase(rng);
    HostScenario s = testing::MakeHostScenario(c, rng);
    const auto want = testing::ExpectedDecodePlanes(s);
    HandoffReceiverOptions o = Options();
    // Small slots: many pieces per pair, several requests' worth of slot reuse.
    o.max_write_bytes = 4096;
    o.landing_bytes = 3 * 4096;
    auto receiver = HandoffReceiver::Start(c.prefill, c.decode, o);
    ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
    ASSERT_TRUE((*receiver)->Expect(7, c.first_token, c.end_token, Targets(s)).ok());
    for (const Status& st : SendAllRanks((*receiver)->address(), s, 7)) ASSERT_TRUE(st.ok()) << st.ToString();
    const Status ready = (*receiver)->Wait(7, Clock::now() + 10s);
    ASSERT_TRUE(ready.ok()) << ready.ToString();
    for (size_t d = 0; d < s.decode.size(); ++d) {
      ASSERT_EQ(s.decode[d].planes(), want[d]) << "round " << round << " decode rank " << d;
    }
    EXPECT_GT((*receiver)->stats().pieces, 0u);
  }
}

TEST_P(HandoffNetworkTest, SendersUseShmOnOneHostAndTcpAcross) {
  std::mt19937_64 rng(3);
  HostScenario s = testing::MakeHostScenario(testing::MakeRandomCase(rng), rng);
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, Options());
  ASSERT_TRUE(receiver.ok());
  auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  EXPECT_EQ((*sender)->transport(), GetParam() ? "tcp" : "shm");
}

// A receiver holding the pool's secret serves only senders that prove it, on the control
// socket and on the landing segment's socket; a sender holding it trusts only receivers that
// ask. Every refusal says so (UNAUTHENTICATED), and the receiver keeps serving.
TEST_P(HandoffNetworkTest, OnlySendersHoldingThePoolsSecretAreServed) {
  std::mt19937_64 rng(17);
  HostScenario s = testing::MakeHostScenario(testing::MakeRandomCase(rng), rng);
  const auto want = testing::ExpectedDecodePlanes(s);
  const SharedSecret pool = SharedSecret::FromBytes("the pool's secret, 32 bytes long");
  HandoffReceiverOptions o = Options();
  o.secret = pool;
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();

  HandoffSenderOptions none, other, holder;
  other.transfer.secret = SharedSecret::FromBytes("another pool's secret, 32 bytes");
  holder.transfer.secret = pool;
  for (const HandoffSenderOptions* refused : {&none, &other}) {
    auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0, *refused);
    ASSERT_EQ(sender.status().code(), StatusCode::kUnauthenticated) << sender.status().ToString();
    EXPECT_NE(sender.status().message().find(refused == &none ? "--auth-file" : "another"), std::string::npos)
        << sender.status().ToString();
  }
  // A receiver without the secret is not trusted by a sender that holds it.
  auto open_receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, Options());
  ASSERT_TRUE(open_receiver.ok());
  auto untrusting = HandoffSender::Connect((*open_receiver)->address(), s.c.prefill, s.c.decode, 0, holder);
  EXPECT_EQ(untrusting.status().code(), StatusCode::kUnauthenticated) << untrusting.status().ToString();

  ASSERT_TRUE((*receiver)->Expect(3, s.c.first_token, s.c.end_token, Targets(s)).ok());
  for (const Status& st : SendAllRanks((*receiver)->address(), s, 3, holder)) ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*receiver)->Wait(3, Clock::now() + 10s).ok());
  for (size_t d = 0; d < s.decode.size(); ++d) EXPECT_EQ(s.decode[d].planes(), want[d]) << "decode rank " << d;
}

// A receiver serving its landing segment over UCX (its tcp on loopback) and senders that ask
// for it: every rank's pieces are written one-sided and land where the definition says.
TEST(HandoffNetwork, SendersWriteOverUcxToAReceiverThatServesIt) {
  if (!transfer::UcxBuilt()) GTEST_SKIP() << "built without UCX";
  std::mt19937_64 rng(23);
  HostScenario s = testing::MakeHostScenario(testing::MakeRandomCase(rng), rng);
  const auto want = testing::ExpectedDecodePlanes(s);
  HandoffReceiverOptions o;
  o.shm_socket_dir = "";
  o.ucx = {true, "tcp", "lo"};
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  HandoffSenderOptions ucx;
  ucx.transfer.ucx = o.ucx;
  auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0, ucx);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  EXPECT_EQ((*sender)->transport(), "ucx");
  ASSERT_TRUE((*receiver)->Expect(5, s.c.first_token, s.c.end_token, Targets(s)).ok());
  for (const Status& st : SendAllRanks((*receiver)->address(), s, 5, ucx)) ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*receiver)->Wait(5, Clock::now() + 10s).ok());
  for (size_t d = 0; d < s.decode.size(); ++d) EXPECT_EQ(s.decode[d].planes(), want[d]) << "decode rank " << d;
}

INSTANTIATE_TEST_SUITE_P(Hosts, HandoffNetworkTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("tcp") : std::string("shm"); });

// A fixed two-rank latent case: 2 PP ranks of 2 layers, 4 DCP ranks, 512 tokens of 64 B.
HostScenario FixedScenario() {
  testing::RandomCase c;
  c.prefill.kind = c.decode.kind = KvLayoutKind::kLatent;
  c.prefill.bytes_per_token_per_layer = c.decode.bytes_per_token_per_layer = 64;
  c.prefill.stage_layers = {2, 2};
  c.decode.num_layers = 4;
  c.decode.dcp_ranks = 4;
  c.first_token = 0;
  c.end_token = 512;
  std::mt19937_64 rng(5);
  return testing::MakeHostScenario(c, rng);
}

TEST(HandoffNetwork, UnexpectedRequestAndOtherLayoutsAreRefusedAndTheConnectionLives) {
  HostScenario s = FixedScenario();
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, {});
  ASSERT_TRUE(receiver.ok());
  auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0);
  ASSERT_TRUE(sender.ok());
  Status st = (*sender)->Send(99, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();

  ASSERT_TRUE((*receiver)->Expect(2, 0, 512, Targets(s)).ok());
  DecodeLayout other = s.c.decode;
  other.interleave = 2;
  auto mismatched = HandoffSender::Connect((*receiver)->address(), s.c.prefill, other, 0);
  ASSERT_TRUE(mismatched.ok());
  st = (*mismatched)->Send(2, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // The first sender's connection still works.
  EXPECT_TRUE((*sender)->Send(2, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s).ok());
  auto second = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)->Send(2, 0, 512, s.prefill[1].cache(), s.prefill_tables[1], Clock::now() + 5s).ok());
  EXPECT_TRUE((*receiver)->Wait(2, Clock::now() + 5s).ok());
}

// A prefill cache named as GPU memory: refused before anything is sent (no KVPOOL_CUDA here, and
// a negative device other than -1 is never valid); the connection stays usable.
TEST(HandoffNetwork, DevicePrefillCacheWithoutCudaIsRefusedAndTheConnectionLives) {
  if (HandoffCudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present: tests/gpu covers device prefill caches";
  HostScenario s = FixedScenario();
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, {});
  ASSERT_TRUE(receiver.ok());
  ASSERT_TRUE((*receiver)->Expect(4, 0, 512, Targets(s)).ok());
  auto sender = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 0);
  ASSERT_TRUE(sender.ok());
  Status st = (*sender)->Send(4, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s, 0);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  st = (*sender)->Send(4, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s, -2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_TRUE((*sender)->Send(4, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 5s).ok());
  auto second = HandoffSender::Connect((*receiver)->address(), s.c.prefill, s.c.decode, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)->Send(4, 0, 512, s.prefill[1].cache(), s.prefill_tables[1], Clock::now() + 5s).ok());
  EXPECT_TRUE((*receiver)->Wait(4, Clock::now() + 5s).ok());
  const auto want = testing::ExpectedDecodePlanes(s);
  for (size_t d = 0; d < s.decode.size(); ++d) EXPECT_EQ(s.decode[d].planes(), want[d]) << "decode rank " << d;
}

// Raw socket helpers for a misbehaving sender.
int RawConnect(const std::string& address) {
  auto a = transfer::ResolveTcpAddress(address);
  if (!a.ok()) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && ::connect(fd, a->get(), a->length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// As a raw peer on `fd`: reads the receiver's hello, then begins request `id` as prefill rank 0
// for tokens [0, 512) of `s`. True only when the receiver accepted the begin.
bool BeginAsRankZero(int fd, const HostScenario& s, uint64_t id, Clock::time_point deadline) {
  ControlMessage begin;
  begin.type = ControlType::kBegin;
  begin.request_id = id;
  begin.a = 0;  // prefill rank
  begin.b = 0;  // first token
  begin.c = 512;  // end token
  begin.d = LayoutsFingerprint(s.c.prefill, s.c.decode);
  if (!ReceiveControl(fd, deadline).ok() || !SendControl(fd, begin, deadline).ok()) return false;
  auto reply = ReceiveControl(fd, deadline);
  return reply.ok() && reply->status().ok();
}

// Takes one landing slot as a peer that never writes it: the slot stays held until `fd` is
// closed (then quarantined). -1 if the receiver did not grant it.
int HoldOneSlot(const std::string& address) {
  const int fd = RawConnect(address);
  if (fd < 0) return -1;
  const auto deadline = Clock::now() + 5s;
  ControlMessage ask;
  ask.type = ControlType::kSlotRequest;
  if (!ReceiveControl(fd, deadline).ok() || !SendControl(fd, ask, deadline).ok()) {
    ::close(fd);
    return -1;
  }
  auto grant = ReceiveControl(fd, deadline);
  if (!grant.ok() || grant->type != ControlType::kSlotGrant || !grant->status().ok()) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Waits until `holds` is true of state the receiver exposes (its stats), or `limit` passes.
// Synchronises on that state, never on time letting something else happen first.
bool Eventually(const std::function<bool()>& holds, Clock::duration limit = 10s) {
  const auto until = Clock::now() + limit;
  while (!holds()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(HandoffNetwork, ReceiverGoneMidRequestFailsTheSenderCleanly) {
  HostScenario s = FixedScenario();
  HandoffReceiverOptions o;
  o.max_write_bytes = 1024;
  o.landing_bytes = 1024;  // one slot
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok());
  const std::string address = (*receiver)->address();
  ASSERT_TRUE((*receiver)->Expect(3, 0, 512, Targets(s)).ok());
  // Mid-request: prefill rank 1's whole part has landed and been scattered...
  auto rank1 = HandoffSender::Connect(address, s.c.prefill, s.c.decode, 1);
  ASSERT_TRUE(rank1.ok());
  ASSERT_TRUE((*rank1)->Send(3, 0, 512, s.prefill[1].cache(), s.prefill_tables[1], Clock::now() + 10s).ok());
  EXPECT_GT((*receiver)->stats().pieces, 0u);
  // ...and rank 0 has begun its part but cannot move a piece: another peer holds the only slot
  // and never frees it, so rank 0's first slot request waits until the receiver goes away.
  const int holder = HoldOneSlot(address);
  ASSERT_GE(holder, 0);
  auto sender = HandoffSender::Connect(address, s.c.prefill, s.c.decode, 0);
  ASSERT_TRUE(sender.ok());
  const uint64_t waits_before = (*receiver)->stats().slot_waits;
  Status st;
  std::thread send([&] {
    st = (*sender)->Send(3, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 10s);
  });
  // The receiver counts a slot wait just before it blocks: from then on the Send cannot finish
  // on its own, whatever the scheduler does.
  const bool blocked = Eventually([&] { return (*receiver)->stats().slot_waits > waits_before; });
  const auto t0 = Clock::now();
  receiver->reset();  // the decode instance goes away mid-request
  send.join();
  const auto took = Clock::now() - t0;
  ::close(holder);
  ASSERT_TRUE(blocked) << "rank 0's slot request never waited";
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_LT(took, 5s) << "a dead receiver must not hold the sender until its deadline";
  // The sender is broken now and says so at once.
  EXPECT_EQ((*sender)->Send(4, 0, 512, s.prefill[0].cache(), s.prefill_tables[0], Clock::now() + 10s).code(),
            StatusCode::kUnavailable);
}

TEST(HandoffNetwork, FullLandingMakesSendersWaitNeverFail) {
  HostScenario s = FixedScenario();
  HandoffReceiverOptions o;
  o.max_write_bytes = 1024;
  o.landing_bytes = 1024;  // one slot for everyone
  o.slot_quarantine = 300ms;
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok());
  ASSERT_TRUE((*receiver)->Expect(1, 0, 512, Targets(s)).ok());
  // Another peer holds the only slot: the senders must wait.
  const int holder = HoldOneSlot((*receiver)->address());
  ASSERT_GE(holder, 0);
  std::vector<Status> results;
  std::thread senders([&] { results = SendAllRanks((*receiver)->address(), s, 1); });
  // Once every rank is waiting, the peer drops the slot into quarantine: the waiting senders
  // must be woken when it comes back, not fail or sit out their request's timeout.
  const uint64_t ranks = s.c.prefill.num_ranks();
  const bool waited = Eventually([&] { return (*receiver)->stats().slot_waits >= ranks; });
  ::close(holder);
  senders.join();
  ASSERT_TRUE(waited) << "not every sender had to wait";
  for (const Status& st : results) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE((*receiver)->Wait(1, Clock::now() + 10s).ok());
}

TEST(HandoffNetwork, SenderLostMidRequestFailsTheRequestAndFreesItsSlot) {
  HostScenario s = FixedScenario();
  HandoffReceiverOptions o;
  o.max_write_bytes = 1024;
  o.landing_bytes = 2048;
  o.slot_quarantine = 100ms;
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok());
  ASSERT_TRUE((*receiver)->Expect(5, 0, 512, Targets(s)).ok());
  const int fd = RawConnect((*receiver)->address());
  ASSERT_GE(fd, 0);
  const auto deadline = Clock::now() + 5s;
  ASSERT_TRUE(BeginAsRankZero(fd, s, 5, deadline));
  ControlMessage ask;
  ask.type = ControlType::kSlotRequest;
  ask.request_id = 5;
  for (int i = 0; i < 2; ++i) {  // takes both slots, then dies
    ASSERT_TRUE(SendControl(fd, ask, deadline).ok());
    ASSERT_TRUE(ReceiveControl(fd, deadline)->status().ok());
  }
  ::close(fd);
  const Status st = (*receiver)->Wait(5, Clock::now() + 5s);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  // After the quarantine the slots serve a new request.
  ASSERT_TRUE((*receiver)->Expect(6, 0, 512, Targets(s)).ok());
  for (const Status& r : SendAllRanks((*receiver)->address(), s, 6)) EXPECT_TRUE(r.ok()) << r.ToString();
  EXPECT_TRUE((*receiver)->Wait(6, Clock::now() + 5s).ok());
}

TEST(HandoffNetwork, GarbageAndForgedPiecesNeverReachTheCache) {
  HostScenario s = FixedScenario();
  const auto before = s.decode[0].planes();
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, {});
  ASSERT_TRUE(receiver.ok());
  ASSERT_TRUE((*receiver)->Expect(8, 0, 512, Targets(s)).ok());
  {  // Bytes that are not the protocol: the connection is closed, nothing else happens.
    const int fd = RawConnect((*receiver)->address());
    const std::string junk = "GET / HTTP/1.1\r\n\r\n" + std::string(100, 'x');
    ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    char buf[256];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
    ::close(fd);
  }
  {  // A piece announced in a slot this connection was never granted: closed, not scattered.
    const int fd = RawConnect((*receiver)->address());
    const auto deadline = Clock::now() + 5s;
    ASSERT_TRUE(ReceiveControl(fd, deadline).ok());
    ControlMessage forged;
    forged.type = ControlType::kPieceWritten;
    forged.request_id = 8;
    ASSERT_TRUE(SendControl(fd, forged, deadline).ok());
    EXPECT_FALSE(ReceiveControl(fd, deadline).ok());
    ::close(fd);
  }
  {  // A piece whose bytes do not match its checksum fails the request.
    const int fd = RawConnect((*receiver)->address());
    const auto deadline = Clock::now() + 5s;
    ASSERT_TRUE(BeginAsRankZero(fd, s, 8, deadline));
    ControlMessage ask;
    ask.type = ControlType::kSlotRequest;
    ask.request_id = 8;
    ASSERT_TRUE(SendControl(fd, ask, deadline).ok());
    auto grant = ReceiveControl(fd, deadline);
    ASSERT_TRUE(grant.ok());
    ControlMessage landed;
    landed.type = ControlType::kPieceWritten;
    landed.request_id = 8;
    landed.a = grant->a;
    landed.d = 12345;  // not the checksum of whatever is in the slot
    ASSERT_TRUE(SendControl(fd, landed, deadline).ok());
    ControlMessage end;
    end.type = ControlType::kEnd;
    end.request_id = 8;
    ASSERT_TRUE(SendControl(fd, end, deadline).ok());
    auto reply = ReceiveControl(fd, deadline);
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->code, StatusCode::kInternal) << reply->text;
    ::close(fd);
  }
  EXPECT_EQ((*receiver)->Wait(8, Clock::now() + 5s).code(), StatusCode::kInternal);
  EXPECT_EQ(s.decode[0].planes(), before) << "no byte of a refused piece may reach the decode cache";
}

TEST(HandoffNetwork, DeviceTargetWithoutThatGpuIsRefusedAndHostTargetsStillWork) {
  HostScenario s = FixedScenario();
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, {});
  ASSERT_TRUE(receiver.ok());
  // Without CUDA (or a GPU) device 0 does not exist either; past the last device never does.
  const int devices = HandoffCudaDeviceCount();
  for (int device : {0, devices, devices + 1000}) {
    if (device < devices) continue;
    std::vector<DecodeTarget> targets = Targets(s);
    targets[1].cuda_device = device;
    const Status st = (*receiver)->Expect(10, 0, 512, targets);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("decode rank 1"), std::string::npos) << st.ToString();
  }
  std::vector<DecodeTarget> bad = Targets(s);
  bad[0].cuda_device = -2;
  EXPECT_EQ((*receiver)->Expect(10, 0, 512, bad).code(), StatusCode::kInvalidArgument);
  // Nothing was expected: the id is free, and host targets hand off as before.
  EXPECT_EQ((*receiver)->Poll(10)->code(), StatusCode::kNotFound);
  const auto want = testing::ExpectedDecodePlanes(s);
  ASSERT_TRUE((*receiver)->Expect(10, 0, 512, Targets(s)).ok());
  for (const Status& st : SendAllRanks((*receiver)->address(), s, 10)) ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*receiver)->Wait(10, Clock::now() + 10s).ok());
  for (size_t d = 0; d < s.decode.size(); ++d) EXPECT_EQ(s.decode[d].planes(), want[d]) << "decode rank " << d;
}

TEST(HandoffNetwork, RequestNotReadyInTimeTimesOut) {
  HostScenario s = FixedScenario();
  HandoffReceiverOptions o;
  o.request_timeout = 200ms;
  auto receiver = HandoffReceiver::Start(s.c.prefill, s.c.decode, o);
  ASSERT_TRUE(receiver.ok());
  ASSERT_TRUE((*receiver)->Expect(9, 0, 512, Targets(s)).ok());
  EXPECT_EQ((*receiver)->Wait(9, Clock::now() + 5s).code(), StatusCode::kTimeout);
  EXPECT_EQ((*receiver)->Poll(9)->code(), StatusCode::kNotFound);  // answered once, then forgotten
}

}  // namespace
}  // namespace kvpool::handoff
