// The /metrics and /health endpoint (http/metrics_endpoint.h) as every process serves it:
// whatever a client sends is one connection's bytes, fed through memory to a server set up
// with the endpoint's own routes and limits (http/endpoint_routes.h) and the handler shape the
// master uses. The HTTP parsing is Debian's cpp-httplib, not built with sanitizers here: what
// this checks is the endpoint around it, not the library's insides.
// Checked: the answer is nothing (refused unanswered) or one HTTP/1.1 response; a 200 comes
// only from the handler, for a GET or HEAD, and carries the handler's body (none for HEAD); a
// GET or HEAD is never refused as a method.
#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/endpoint_routes.h"

using namespace kvpool::http;

namespace {

constexpr std::string_view kBody = "kvpool_fuzz_total 1\n";

// The server, with process_request (protected) reachable.
class FuzzServer : public httplib::Server {
 public:
  using httplib::Server::process_request;
};

FuzzServer& Server() {
  static FuzzServer* server = [] {
    auto* s = new FuzzServer();  // never destroyed: one for the whole run
    ConfigureServer(*s, [](std::string_view path) {
      return path == "/metrics" ? HttpResponse{200, kPrometheusContentType, std::string(kBody)}
                                : HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
    }, {});
    return s;
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view request(reinterpret_cast<const char*>(data), size);
  httplib::detail::BufferStream stream;
  stream.write(request.data(), request.size());  // read back by the server, then its answer after it
  bool closed = false;
  Server().process_request(stream, /*close_connection=*/true, closed, [](httplib::Request&) {});
  const std::string_view answer = std::string_view(stream.get_buffer()).substr(size);
  if (answer.empty()) return 0;
  if (!answer.starts_with("HTTP/1.1 ")) std::abort();
  // The method as the library reads it: the first word, whitespace (tabs too) around it
  // skipped (fuzz/corpus/http_endpoint_fuzz/head_after_tab, tabs_around_get).
  const size_t first = std::min(request.find_first_not_of(" \t\r\n"), request.size());
  const std::string_view method = request.substr(first, request.find_first_of(" \t\r\n", first) - first);
  const bool get = method == "GET", head = method == "HEAD";
  if (answer.starts_with("HTTP/1.1 200 ")) {
    if (!get && !head) std::abort();
    if (head == answer.ends_with(kBody)) std::abort();
  }
  if (answer.starts_with("HTTP/1.1 405 ") && (get || head)) std::abort();
  return 0;
}
