// The shm client's side of the handshake (transfer/shm_protocol.h): the reply a store sends to
// an open request, with 0 to 3 fds passed by SCM_RIGHTS, read by ReadShmReply; an accepted grant
// is mapped as ShmTransport maps it (transfer/shm_mapping.h).
// Input: byte 0 = fd count (bits 0-1), served flag set (bit 2), prefault the mapping (bit 3);
// then a 16-bit little-endian size per fd (the memfds passed, 0 to 64 KiB); the rest is the
// reply message.
// Checked: a refusal carries a known status code; an accepted grant has both fds (and the
// tier's file exactly when it grants a tier size), and its mapping is exactly the size the
// reply says, every byte of it readable, and the flag page readable; no fd outlives the
// exchange.
#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transfer/shm_mapping.h"
#include "transfer/shm_protocol.h"

using namespace kvpool;
using namespace kvpool::transfer;

namespace {

constexpr uint64_t kAskedSegment = 7;

void Require(bool ok) {
  if (!ok) std::abort();
}

int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  Require(dir != nullptr);
  int count = 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

// A memfd of `size` bytes; the first words say "served, segment 7" when `served`.
int Memfd(uint64_t size, bool served) {
  int fd = memfd_create("shm-reply-fuzz", MFD_CLOEXEC);
  Require(fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0);
  const uint64_t words[2] = {served ? 1u : 0u, kAskedSegment};
  if (served && size >= sizeof words) Require(pwrite(fd, words, sizeof words, 0) == sizeof words);
  return fd;
}

void Exchange(const uint8_t* data, size_t size) {
  const int fd_count = data[0] & 3;
  const bool served = (data[0] & 4) != 0;
  const bool prefault = (data[0] & 8) != 0;
  size_t at = 1;
  std::vector<int> passed;
  for (int i = 0; i < fd_count && at + 2 <= size; ++i, at += 2) {
    passed.push_back(Memfd(data[at] | (data[at + 1] << 8), served));
  }
  int sockets[2];
  Require(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) == 0);
  // One message, as a store sends it (an empty one too), then the store is gone.
  iovec iov{const_cast<uint8_t*>(data + at), size - at};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  if (!passed.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(passed.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(passed.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), passed.data(), passed.size() * sizeof(int));
  }
  Require(sendmsg(sockets[0], &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(size - at));
  for (int fd : passed) close(fd);
  close(sockets[0]);

  auto grant = ReadShmReply(sockets[1], kAskedSegment, "fuzz");
  close(sockets[1]);
  if (!grant.ok()) {
    Require(grant.status().code() != StatusCode::kOk &&
            static_cast<int>(grant.status().code()) <= static_cast<int>(kHighestStatusCode));
    return;
  }
  Require(grant->segment_fd.valid() && grant->flag_fd.valid());
  Require((grant->tier_size > 0) == grant->tier_fd.valid());
  auto mapping = ShmMapping::Map(kAskedSegment, *grant, prefault);
  if (!mapping.ok()) return;  // a size no mmap takes: refused by the client, cleanly
  const ShmMapping& m = **mapping;
  Require(m.size() == grant->size && m.bytes().size() == grant->size);
  Require(m.tier_size() == grant->tier_size && (m.tier_fd() >= 0) == grant->tier_fd.valid());
  if (m.size() > 0) {
    // Every page of the mapping is the segment's (a page past the memfd's end faults).
    volatile char sink = 0;
    for (uint64_t page = 0; page < m.size(); page += 4096) sink = sink + m.base()[page];
    sink = sink + m.base()[m.size() - 1];
  }
  (void)m.served();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;  // one message within the socket's buffer
  const int before = OpenFds();
  Exchange(data, size);
  Require(OpenFds() == before);
  return 0;
}
