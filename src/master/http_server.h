// HttpServer: a tiny HTTP/1.1 server for the master's /metrics and /health.
//
// One thread accepts and answers one connection at a time (Connection: close). It is for
// scrapers and probes, not traffic: requests are capped at 8 KiB and a client gets 2 s to
// send its request. Anything that does not parse as "METHOD /path HTTP/1.x" gets 400 and
// the server carries on.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.h"

namespace kvpool::master {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  // Called on the server thread for each well-formed GET/HEAD request; `path` excludes
  // any query string.
  using Handler = std::function<HttpResponse(std::string_view path)>;

  // Binds `listen` ("host:port"; port 0 picks a free one) and starts serving.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& listen, Handler handler);

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Stops accepting and joins the thread. Idempotent.
  void Shutdown();

 private:
  HttpServer(int listen_fd, int port, Handler handler);
  void Serve();
  void HandleConnection(int fd);

  int listen_fd_;
  int port_;
  int wake_pipe_[2] = {-1, -1};  // a byte on [1] wakes the serving thread to exit
  Handler handler_;
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

// Splits "host:port" ("[v6]:port" too). Empty host means all interfaces.
Status SplitHostPort(std::string_view address, std::string* host, int* port);

}  // namespace kvpool::master
