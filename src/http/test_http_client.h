// Test-only: a raw HTTP/1.1 exchange with an endpoint on loopback, for the tests of the
// processes' /metrics and /health (http, master, store). Sends the bytes as given (no
// half-close: HTTP clients do not) and reads until the endpoint closes; the poll bound only
// keeps a broken endpoint from hanging a test.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kvpool::http::testing {

// A connected socket to 127.0.0.1:port, or -1.
inline int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::string HttpExchange(int port, std::string_view request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "connect failed";
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 30'000) == 1) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return answer;
}

inline std::string HttpGet(int port, std::string_view path) {
  return HttpExchange(port, "GET " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

// The value of the sample `series` (name and labels, as the text writes them) in Prometheus
// text, or -1 when the text has no such line.
inline double SampleValue(std::string_view text, std::string_view series) {
  const std::string line_start = "\n" + std::string(series) + " ";
  const size_t at = text.find(line_start);
  if (at == std::string_view::npos) return -1;
  return std::strtod(std::string(text.substr(at + line_start.size(), 32)).c_str(), nullptr);
}

}  // namespace kvpool::http::testing
