#include "http/metrics_endpoint.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/host_port.h"
#include "http/endpoint_routes.h"

namespace kvpool::http {

void ConfigureServer(httplib::Server& server, MetricsEndpoint::Handler handler, const EndpointOptions& options) {
  const int threads = std::max(1, options.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server.set_read_timeout(options.read_timeout_ms / 1000, (options.read_timeout_ms % 1000) * 1000);
  server.set_write_timeout(2, 0);
  server.set_payload_max_length(8192);
  server.set_keep_alive_max_count(1);  // scrapers and probes: one request a connection
  // The library's default also sets SO_REUSEPORT, which lets a second process bind the same
  // port and take half its connections: a port in use must be an error instead.
  server.set_socket_options([](int fd) {
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.Get(".*", [handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
    HttpResponse answer = handler(request.path);
    response.status = answer.status;
    response.set_content(std::move(answer.body), answer.content_type.c_str());
  });
  const auto refuse = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
    response.set_header("Allow", "GET, HEAD");
    response.set_content("only GET and HEAD\n", "text/plain; charset=utf-8");
  };
  server.Post(".*", refuse);
  server.Put(".*", refuse);
  server.Patch(".*", refuse);
  server.Delete(".*", refuse);
  server.Options(".*", refuse);
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen, Handler handler,
                                                                const EndpointOptions& options) {
  std::string host;
  uint16_t port = 0;
  KVPOOL_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  if (host.empty()) host = "0.0.0.0";
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  auto server = std::make_unique<httplib::Server>();
  ConfigureServer(*server, std::move(handler), options);
  errno = 0;
  const int bound = port == 0 ? server->bind_to_any_port(host) : (server->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    // The library says only that it failed; its last bind's errno says why.
    return Unavailable(fmt::format("cannot listen for HTTP on {}: {}", listen,
                                   errno != 0 ? std::strerror(errno) : "no address to bind"));
  }
  endpoint->port_ = bound;
  endpoint->thread_ = std::thread([s = server.get(), done = &endpoint->stopped_] {
    s->listen_after_bind();
    done->store(true);
  });
  endpoint->server_ = std::move(server);
  return endpoint;
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::StartMetricsAndHealth(
    const std::string& listen, std::function<void(std::string*)> metrics, std::function<std::string()> health) {
  return Start(listen, [metrics = std::move(metrics), health = std::move(health)](std::string_view path) {
    HttpResponse response;
    if (path == "/metrics") {
      response.content_type = kPrometheusContentType;
      metrics(&response.body);
    } else if (path == "/health") {
      response.body = health();
    } else {
      response.status = 404;
      response.body = "not found; try /metrics or /health\n";
    }
    return response;
  });
}

MetricsEndpoint::~MetricsEndpoint() { Shutdown(); }

void MetricsEndpoint::Shutdown() {
  if (!server_) return;
  // stop() does nothing until the serving loop has begun, which may not be yet: ask until it
  // has ended.
  while (!stopped_.load()) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  thread_.join();
  server_.reset();
}

}  // namespace kvpool::http
