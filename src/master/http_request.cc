#include "master/http_request.h"

namespace kvpool::master {

namespace {

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < 'A' || c > 'Z') return false;
  }
  return true;
}

HttpRequest Refuse(int status, std::string_view reason) {
  HttpRequest r;
  r.refusal = status;
  r.reason = reason;
  return r;
}

}  // namespace

HttpRequest ParseHttpRequest(std::string_view request) {
  // Request line: METHOD SP TARGET SP HTTP/1.x
  const size_t line_end = request.find("\r\n");
  const std::string_view line = request.substr(0, line_end == std::string_view::npos ? 0 : line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return Refuse(400, "malformed request line\n");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || target.empty() || target.front() != '/' ||
      (version != "HTTP/1.1" && version != "HTTP/1.0")) {
    return Refuse(400, "malformed request line\n");
  }
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) return Refuse(405, "only GET and HEAD are served\n");
  HttpRequest r;
  r.head_only = head_only;
  r.path = target.substr(0, target.find('?'));
  return r;
}

}  // namespace kvpool::master
