#include "transfer/shm_protocol.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transfer/auth_handshake.h"
#include "transfer/socket_util.h"
#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {


// A granted fd must hold the bytes the reply grants: a mapping past the end of its file faults
// (SIGBUS) at the first touch of those pages, far from here.
Status CheckFdHolds(int fd, uint64_t bytes, std::string_view what, std::string_view peer) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(StatusCode::kInternal, fmt::format("fstat {} from {}", what, peer), errno);
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    return Internal(fmt::format("shm reply from {} grants {} bytes of {}, but the fd passed holds {}", peer, bytes,
                                what, static_cast<int64_t>(st.st_size)));
  }
  return Status::Ok();
}

void SetIoTimeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

}  // namespace

Result<ShmGrant> RequestShmGrant(const std::string& socket_path, uint64_t segment_id,
                                 std::chrono::milliseconds timeout, const SharedSecret* secret) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument(fmt::format("bad shm socket path '{}'", socket_path));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return ErrnoStatus(StatusCode::kInternal, "socket(AF_UNIX)", errno);
  SetIoTimeout(sock.get(), timeout);
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus(StatusCode::kUnavailable, fmt::format("connect {}", socket_path), errno);
  }
  if (secret != nullptr) {
    KVPOOL_RETURN_IF_ERROR(ProveSecret(sock.get(), *secret, kShmPurpose, fmt::format("store at {}", socket_path),
                                       std::chrono::steady_clock::now() + timeout));
  }

  uint8_t request[kShmRequestSize] = {};
  PutField<uint32_t>(request, 0, kShmMagic);
  request[4] = kShmVersion;
  request[5] = kShmOpOpenSegment;
  PutField<uint64_t>(request, 8, segment_id);
  if (::send(sock.get(), request, sizeof(request), MSG_NOSIGNAL) != sizeof(request)) {
    return ErrnoStatus(StatusCode::kUnavailable, fmt::format("send to {}", socket_path), errno);
  }

  return ReadShmReply(sock.get(), segment_id, socket_path);
}

Result<ShmGrant> ReadShmReply(int fd, uint64_t segment_id, std::string_view peer) {
  uint8_t reply[kShmReplySize] = {};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  iovec iov{reply, sizeof(reply)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) return ErrnoStatus(StatusCode::kUnavailable, fmt::format("recv from {}", peer), errno);

  // Take ownership of any fds first so an error path never leaks them.
  ShmGrant grant;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int fds[3] = {-1, -1, -1};
      std::memcpy(fds, CMSG_DATA(c), std::min<size_t>(count, 3) * sizeof(int));
      for (size_t i = 3; i < count; ++i) {
        int extra;
        std::memcpy(&extra, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        ::close(extra);
      }
      grant.segment_fd.Reset(fds[0]);
      grant.flag_fd.Reset(fds[1]);
      grant.tier_fd.Reset(fds[2]);
    }
  }
  if (n >= 4 && StartsLikeChallenge(reply)) {
    return Unauthenticated(fmt::format("store at {} asks for the pool's secret: give this process the pool's --auth-file",
                                       peer));
  }
  if (n != static_cast<ssize_t>(kShmReplySize) || GetField<uint32_t>(reply, 0) != kShmMagic ||
      reply[4] != kShmVersion || (msg.msg_flags & MSG_CTRUNC)) {
    return Internal(fmt::format("malformed shm reply from {}", peer));
  }
  const uint16_t code = GetField<uint16_t>(reply, 6);
  if (code > static_cast<uint16_t>(kHighestStatusCode)) {
    return Internal(fmt::format("malformed shm reply from {}: unknown status code {}", peer, code));
  }
  const auto status = static_cast<StatusCode>(code);
  if (status == StatusCode::kUnauthenticated) {
    return Unauthenticated(fmt::format("store at {} refused this process: another user, or another secret in its "
                                       "--auth-file",
                                       peer));
  }
  if (status != StatusCode::kOk) {
    return Status(status, fmt::format("store at {} does not serve segment {}", peer, segment_id));
  }
  if (GetField<uint64_t>(reply, 8) != segment_id || !grant.segment_fd.valid() || !grant.flag_fd.valid()) {
    return Internal(fmt::format("shm reply from {} lacks the segment's fds", peer));
  }
  grant.size = GetField<uint64_t>(reply, 16);
  grant.tier_size = GetField<uint64_t>(reply, 24);
  KVPOOL_RETURN_IF_ERROR(CheckFdHolds(grant.segment_fd.get(), grant.size, "the segment", peer));
  KVPOOL_RETURN_IF_ERROR(CheckFdHolds(grant.flag_fd.get(), kShmFlagPageSize, "the served-flag page", peer));
  if ((grant.tier_size > 0) != grant.tier_fd.valid()) {
    return Internal(fmt::format("shm reply from {} has a tier size of {} and {} tier file", peer, grant.tier_size,
                                grant.tier_fd.valid() ? "a" : "no"));
  }
  if (grant.tier_fd.valid()) KVPOOL_RETURN_IF_ERROR(CheckFdHolds(grant.tier_fd.get(), grant.tier_size, "the SSD tier", peer));
  return grant;
}

Status ReadShmRequest(int fd, uint64_t* segment_id) {
  uint8_t request[kShmRequestSize + 1] = {};
  ssize_t n = ::recv(fd, request, sizeof(request), 0);
  if (n != static_cast<ssize_t>(kShmRequestSize) || GetField<uint32_t>(request, 0) != kShmMagic ||
      request[4] != kShmVersion || request[5] != kShmOpOpenSegment) {
    return InvalidArgument("malformed shm request");
  }
  *segment_id = GetField<uint64_t>(request, 8);
  return Status::Ok();
}

Status SendShmReply(int fd, StatusCode status, uint64_t segment_id, uint64_t size, int segment_fd, int flag_fd,
                    int tier_fd, uint64_t tier_size) {
  uint8_t reply[kShmReplySize] = {};
  PutField<uint32_t>(reply, 0, kShmMagic);
  reply[4] = kShmVersion;
  reply[5] = kShmOpOpenSegment;
  PutField<uint16_t>(reply, 6, static_cast<uint16_t>(status));
  PutField<uint64_t>(reply, 8, segment_id);
  PutField<uint64_t>(reply, 16, size);
  const bool tier = status == StatusCode::kOk && tier_fd >= 0;
  PutField<uint64_t>(reply, 24, tier ? tier_size : 0);
  iovec iov{reply, sizeof(reply)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  if (status == StatusCode::kOk) {
    const size_t count = tier ? 3 : 2;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    const int fds[3] = {segment_fd, flag_fd, tier_fd};
    std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  }
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(reply))) {
    return ErrnoStatus(StatusCode::kUnavailable, "shm reply", errno);
  }
  return Status::Ok();
}

}  // namespace kvpool::transfer
