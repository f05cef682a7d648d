#include "transfer/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

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

Status ErrnoStatus(StatusCode code, std::string_view context, int err) {
  return Status(code, fmt::format("{}: {}", context, std::strerror(err)));
}

}  // namespace kvpool::transfer
