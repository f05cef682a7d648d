#include "transfer/shm_protocol.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {

constexpr uint64_t kSegment = 7;

int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  int count = 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

UniqueFd Memfd(uint64_t size) {
  UniqueFd fd(memfd_create("shm-protocol-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  return fd;
}

// The client's end of a handshake whose store has sent its reply (and closed).
class ShmReplyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets_), 0); }
  void TearDown() override {
    for (int fd : sockets_) close(fd);
  }

  // Sends what a store sends (SendShmReply), with memfds of the given sizes.
  void StoreReplies(StatusCode code, uint64_t granted, uint64_t segment_bytes, uint64_t flag_bytes) {
    UniqueFd segment = Memfd(segment_bytes), flag = Memfd(flag_bytes);
    ASSERT_TRUE(SendShmReply(sockets_[0], code, kSegment, granted, segment.get(), flag.get()).ok());
  }
  Result<ShmGrant> ClientReads() { return ReadShmReply(sockets_[1], kSegment, "test store"); }

  int sockets_[2] = {-1, -1};
};

TEST_F(ShmReplyTest, GrantsWhatTheStoreServes) {
  StoreReplies(StatusCode::kOk, 8192, 8192, kShmFlagPageSize);
  auto grant = ClientReads();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->size, 8192u);
  EXPECT_TRUE(grant->segment_fd.valid());
  EXPECT_TRUE(grant->flag_fd.valid());
}

TEST_F(ShmReplyTest, PassesOnTheStoresRefusal) {
  ASSERT_TRUE(SendShmReply(sockets_[0], StatusCode::kStale, kSegment, 0, -1, -1).ok());
  EXPECT_EQ(ClientReads().status().code(), StatusCode::kStale);
}

// Found by fuzz/shm_reply_fuzz.cc: a grant of more bytes than the memfd holds was accepted, and
// the first touch of a page past the memfd's end killed the client with SIGBUS.
TEST_F(ShmReplyTest, RefusesAGrantLargerThanItsMemfd) {
  const int before = OpenFds();
  StoreReplies(StatusCode::kOk, 246, 0, kShmFlagPageSize);
  auto grant = ClientReads();
  EXPECT_EQ(grant.status().code(), StatusCode::kInternal);
  EXPECT_NE(grant.status().message().find("holds 0"), std::string::npos) << grant.status().ToString();

  StoreReplies(StatusCode::kOk, 8192 + 1, 8192, kShmFlagPageSize);
  EXPECT_EQ(ClientReads().status().code(), StatusCode::kInternal);
  EXPECT_EQ(OpenFds(), before);  // the refused grants' fds are closed
}

// Found by fuzz/shm_reply_fuzz.cc: a status code the protocol does not have was passed on as the
// store's answer; the tcp frames and the handoff's control refuse such codes, and so does this.
TEST_F(ShmReplyTest, RefusesAnUnknownStatusCode) {
  ASSERT_TRUE(SendShmReply(sockets_[0], static_cast<StatusCode>(284), kSegment, 0, -1, -1).ok());
  auto grant = ClientReads();
  EXPECT_EQ(grant.status().code(), StatusCode::kInternal);
  EXPECT_NE(grant.status().message().find("unknown status code 284"), std::string::npos) << grant.status().ToString();
}

TEST_F(ShmReplyTest, RefusesAFlagPageShorterThanAPage) {
  StoreReplies(StatusCode::kOk, 4096, 4096, 0);
  EXPECT_EQ(ClientReads().status().code(), StatusCode::kInternal);
}

TEST_F(ShmReplyTest, RefusesAGrantWithoutItsFds) {
  uint8_t reply[kShmReplySize] = {};
  PutField<uint32_t>(reply, 0, kShmMagic);
  reply[4] = kShmVersion;
  reply[5] = kShmOpOpenSegment;
  PutField<uint64_t>(reply, 8, kSegment);
  PutField<uint64_t>(reply, 16, 4096);
  ASSERT_EQ(send(sockets_[0], reply, sizeof reply, 0), static_cast<ssize_t>(sizeof reply));
  EXPECT_EQ(ClientReads().status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kvpool::transfer
