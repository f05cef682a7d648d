// The endpoint's routes and limits, apart from its sockets and threads: MetricsEndpoint sets
// up its server with it, and so does the fuzzer (fuzz/http_endpoint_fuzz.cc), which feeds
// requests to the same server through memory.
#pragma once

#include "http/metrics_endpoint.h"

namespace httplib {
class Server;
}

namespace kvpool::http {

// GET (and HEAD) of any path to `handler`, other methods 405, requests over 8 KiB refused,
// one request a connection, `options`' read timeout and thread pool.
void ConfigureServer(httplib::Server& server, MetricsEndpoint::Handler handler, const EndpointOptions& options);

}  // namespace kvpool::http
