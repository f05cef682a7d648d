// The request line of an HTTP/1.x request, as the master's /metrics and /health server reads
// it (http_server.h): "METHOD SP TARGET SP HTTP/1.x" up to the first CRLF. Header lines after it
// are not read; nothing else about the request matters to a scraper or a probe.
//
// A pure function of the bytes a client sent, so that the unit test and the fuzzer
// (fuzz/http_request_fuzz.cc) feed it directly, without a socket.
#pragma once

#include <string_view>

namespace kvpool::master {

struct HttpRequest {
  int refusal = 0;          // 0: a GET or HEAD to serve; else the status to answer (400, 405)
  std::string_view reason;  // refusal != 0: the body to answer with
  bool head_only = false;   // HEAD: answer without a body
  std::string_view path;    // the target without its query string; a view into the request

  bool ok() const { return refusal == 0; }
};

// Reads the request line of `request` (every byte the client sent, or what arrived before it
// closed or timed out). 400 for anything that is not "METHOD /target HTTP/1.0|1.1" with an
// upper-case method; 405 for a method other than GET and HEAD.
HttpRequest ParseHttpRequest(std::string_view request);

}  // namespace kvpool::master
