#include "master/http_server.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "master/http_request.h"

namespace kvpool::master {

namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;
constexpr int kClientTimeoutSeconds = 2;

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    default: return "Error";
  }
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // client went away; nothing to do
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void Respond(int fd, const HttpResponse& response, bool head_only) {
  std::string header = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
      response.status, ReasonPhrase(response.status), response.content_type,
      response.body.size());
  WriteAll(fd, header);
  if (!head_only) WriteAll(fd, response.body);
}

HttpResponse Plain(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Closing a socket with unread input makes the kernel send RST, which can destroy the
// response before the client reads it (e.g. after a 431). Half-close, then read a bounded
// amount until the client closes too.
void DrainAndClose(int fd) {
  ::shutdown(fd, SHUT_WR);
  timeval brief{0, 200 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &brief, sizeof(brief));
  char sink[4096];
  for (size_t drained = 0; drained < (64 << 10);) {
    ssize_t n = ::recv(fd, sink, sizeof(sink), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

Status SplitHostPort(std::string_view address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument(fmt::format("address '{}' is not host:port", address));
  }
  std::string_view h = address.substr(0, colon);
  std::string_view p = address.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int value = -1;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc() || ptr != p.data() + p.size() || value < 0 || value > 65535) {
    return InvalidArgument(fmt::format("address '{}' has no valid port (0-65535)", address));
  }
  *host = std::string(h);
  *port = value;
  return Status::Ok();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                      Handler handler) {
  std::string host;
  int port = 0;
  KVPOOL_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints,
                         &addresses);
  if (rc != 0) {
    return InvalidArgument(
        fmt::format("metrics address '{}': cannot resolve host: {}", listen, gai_strerror(rc)));
  }
  int fd = -1;
  int bind_errno = 0;
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      bind_errno = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(addresses);
  if (fd < 0) {
    return Unavailable(fmt::format("cannot listen for /metrics on {}: {}", listen,
                                   std::strerror(bind_errno)));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<HttpServer>(new HttpServer(fd, bound_port, std::move(handler)));
}

HttpServer::HttpServer(int listen_fd, int port, Handler handler)
    : listen_fd_(listen_fd), port_(port), handler_(std::move(handler)) {
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
  thread_ = std::thread([this] { Serve(); });
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  if (stopped_.exchange(true)) return;
  if (wake_pipe_[1] >= 0) {
    char byte = 0;
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::Serve() {
  while (!stopped_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    // Without a wake pipe, poll with a timeout so Shutdown still gets noticed.
    int ready = ::poll(fds, wake_pipe_[0] >= 0 ? 2 : 1, wake_pipe_[0] >= 0 ? -1 : 100);
    if (ready < 0 && errno != EINTR) return;
    if (ready <= 0) continue;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    HandleConnection(client);
    DrainAndClose(client);
  }
}

void HttpServer::HandleConnection(int fd) {
  timeval timeout{kClientTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));

  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() >= kMaxRequestBytes) {
      Respond(fd, Plain(431, "request head larger than 8 KiB\n"), false);
      return;
    }
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // closed, timed out or failed: parse what arrived
    request.append(buffer, static_cast<size_t>(n));
  }

  const HttpRequest parsed = ParseHttpRequest(request);
  if (!parsed.ok()) {
    Respond(fd, Plain(parsed.refusal, std::string(parsed.reason)), false);
    return;
  }
  Respond(fd, handler_(parsed.path), parsed.head_only);
}

}  // namespace kvpool::master
