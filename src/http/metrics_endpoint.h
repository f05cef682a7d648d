// MetricsEndpoint: the /metrics and /health HTTP endpoint a kvpool process serves (issue 19),
// on cpp-httplib (Debian's libcpp-httplib-dev). A small pool of threads answers, so a slow or
// stuck client holds one thread for at most the read timeout while probes and scrapes go on.
// GET (and HEAD) only, other methods get 405; requests over 8 KiB and malformed ones get the
// library's 4xx and the endpoint carries on. Bodies come from a handler, one call per request.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace kvpool::http {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Prometheus text exposition format 0.0.4.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

struct EndpointOptions {
  int threads = 4;            // requests answered at once
  int read_timeout_ms = 2000;  // a client gets this long to send its request
};

class MetricsEndpoint {
 public:
  // Called on one of the endpoint's threads for each GET; `path` excludes any query string.
  using Handler = std::function<HttpResponse(std::string_view path)>;

  // Binds `listen` ("HOST:PORT"; port 0 picks a free one) and starts serving. INVALID_ARGUMENT
  // for a bad address, UNAVAILABLE when it cannot be bound (naming it).
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen, Handler handler,
                                                        const EndpointOptions& options = {});
  // What every process serves: /metrics is Prometheus text that `metrics` appends to the body,
  // /health is `health`'s line, any other path 404 naming the two.
  static Result<std::unique_ptr<MetricsEndpoint>> StartMetricsAndHealth(const std::string& listen,
                                                                        std::function<void(std::string*)> metrics,
                                                                        std::function<std::string()> health);
  ~MetricsEndpoint();  // Shutdown()
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return port_; }
  // Stops accepting, lets the requests being answered finish, joins. Idempotent.
  void Shutdown();

 private:
  MetricsEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopped_{false};  // the serving loop has ended
};

}  // namespace kvpool::http
