#include "transfer/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kvpool::transfer {

Result<SocketAddress> ResolveTcpAddress(std::string_view address) {
  std::string host;
  uint16_t port = 0;
  KVPOOL_RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Unavailable(fmt::format("cannot resolve '{}': {}", address, gai_strerror(rc)));
  }
  SocketAddress out;
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  out.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

std::string FormatSocketAddress(const SocketAddress& address) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (address.storage.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    ::inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    return fmt::format("{}:{}", ip, ntohs(in->sin_port));
  }
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
  return fmt::format("[{}]:{}", ip, ntohs(in6->sin6_port));
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoStatus(StatusCode::kInternal, "fcntl O_NONBLOCK", errno);
  }
  return Status::Ok();
}

void SetTcpDataOptions(int fd, int send_buffer_bytes, int receive_buffer_bytes) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (send_buffer_bytes > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof(send_buffer_bytes));
  }
  if (receive_buffer_bytes > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
  }
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitReady(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Exactly `size` bytes, by the deadline; false when the peer closed, failed or was too slow.
bool ReadExactly(int fd, uint8_t* out, size_t size, std::chrono::steady_clock::time_point deadline) {
  size_t got = 0;
  while (got < size) {
    if (!WaitReady(fd, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd, out + got, size - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      return false;
    }
  }
  return true;
}

bool WriteExactly(int fd, const uint8_t* in, size_t size, std::chrono::steady_clock::time_point deadline) {
  size_t sent = 0;
  while (sent < size) {
    if (!WaitReady(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, in + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      return false;
    }
  }
  return true;
}

Result<UniqueFd> ConnectTcp(std::string_view address, std::chrono::steady_clock::time_point deadline) {
  auto resolved = ResolveTcpAddress(address);
  if (!resolved.ok()) return resolved.status();
  UniqueFd fd(::socket(resolved->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(StatusCode::kUnavailable, "socket", errno);
  if (::connect(fd.get(), resolved->get(), resolved->length) != 0) {
    if (errno != EINPROGRESS) return ErrnoStatus(StatusCode::kUnavailable, fmt::format("connect {}", address), errno);
    if (!WaitReady(fd.get(), POLLOUT, deadline)) {
      return Unavailable(fmt::format("connect {}: no answer in time", address));
    }
    int err = 0;
    socklen_t length = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &length);
    if (err != 0) return ErrnoStatus(StatusCode::kUnavailable, fmt::format("connect {}", address), err);
  }
  SetTcpDataOptions(fd.get(), 0, 0);
  return fd;
}

Result<std::string> InterfaceWithAddress(std::string_view ip) {
  const std::string text(ip);
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = ::inet_pton(AF_INET, text.c_str(), &v4) == 1;
  if (!is_v4 && ::inet_pton(AF_INET6, text.c_str(), &v6) != 1) {
    return InvalidArgument(fmt::format("'{}' is not an IP address", ip));
  }
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return ErrnoStatus(StatusCode::kInternal, "getifaddrs", errno);
  std::string found;
  for (const ifaddrs* a = all; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == v4.s_addr) {
      found = a->ifa_name;
    } else if (!is_v4 && a->ifa_addr->sa_family == AF_INET6 &&
               std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6, sizeof(v6)) == 0) {
      found = a->ifa_name;
    }
  }
  ::freeifaddrs(all);
  if (found.empty()) return NotFound(fmt::format("no interface of this host has address {}", ip));
  return found;
}

Status ErrnoStatus(StatusCode code, std::string_view context, int err) {
  return Status(code, fmt::format("{}: {}", context, std::strerror(err)));
}

}  // namespace kvpool::transfer
