// The master's /metrics and /health endpoint (master/http_request.h): whatever a client sends
// is read as a request line, as the server does with every byte that arrived.
// Checked: a request is served (GET or HEAD) or refused with 400 or 405 and a reason; a served
// path is a '/'-path inside the request line (before the first CRLF), without its query or
// spaces, and the request line rebuilt from it reads back to the same path.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "master/http_request.h"

using namespace kvpool::master;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view request(reinterpret_cast<const char*>(data), size);
  const HttpRequest parsed = ParseHttpRequest(request);
  if (!parsed.ok()) {
    if ((parsed.refusal != 400 && parsed.refusal != 405) || parsed.reason.empty()) std::abort();
    return 0;
  }
  const std::string_view path = parsed.path;
  const size_t line_end = request.find("\r\n");
  if (path.empty() || path.front() != '/' || path.find_first_of("? ") != std::string_view::npos) std::abort();
  if (line_end == std::string_view::npos || path.data() < request.data() ||
      path.data() + path.size() > request.data() + line_end) {
    std::abort();
  }
  if (parsed.head_only != request.starts_with("HEAD ")) std::abort();
  const std::string again = "GET " + std::string(path) + " HTTP/1.1\r\n\r\n";
  const HttpRequest back = ParseHttpRequest(again);
  if (!back.ok() || back.path != path || back.head_only) std::abort();
  return 0;
}
