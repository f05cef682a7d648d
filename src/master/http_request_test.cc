#include "master/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace kvpool::master {
namespace {

TEST(HttpRequestTest, ServesGetAndHeadWithoutTheQuery) {
  HttpRequest get = ParseHttpRequest("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get.path, "/metrics");
  EXPECT_FALSE(get.head_only);

  HttpRequest head = ParseHttpRequest("HEAD /health?verbose=1 HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head.path, "/health");
  EXPECT_TRUE(head.head_only);

  // The path is a view into what was read; a query alone leaves "/".
  const std::string bytes = "GET /?x HTTP/1.1\r\n";
  HttpRequest root = ParseHttpRequest(bytes);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root.path, "/");
  EXPECT_EQ(root.path.data(), bytes.data() + 4);
}

TEST(HttpRequestTest, RefusesWhatIsNotARequestLine) {
  for (const char* junk : {"",                                  // nothing arrived
                           "GET /metrics HTTP/1.1",             // no CRLF: the line never ended
                           "GET /metrics\r\n\r\n",              // no version
                           "GET metrics HTTP/1.1\r\n\r\n",      // target not a path
                           "GET  /metrics HTTP/1.1\r\n\r\n",    // empty target
                           "get /health HTTP/1.1\r\n\r\n",      // method not a token
                           " /health HTTP/1.1\r\n\r\n",         // no method
                           "GET /metrics SPDY/9\r\n\r\n",       // another protocol
                           "GET /metrics HTTP/2.0\r\n\r\n",     // another version
                           "GET /metrics HTTP/1.1 \r\n\r\n",    // trailing space
                           "GET /a b HTTP/1.1\r\n\r\n",         // space in the target
                           "GET /metrics HTTP/1.1\n\n"}) {      // bare LFs
    HttpRequest r = ParseHttpRequest(junk);
    EXPECT_EQ(r.refusal, 400) << junk;
    EXPECT_EQ(r.reason, "malformed request line\n") << junk;
  }
}

TEST(HttpRequestTest, RefusesOtherMethodsWith405) {
  for (const char* request : {"POST /metrics HTTP/1.1\r\n\r\n", "DELETE /health HTTP/1.0\r\n\r\n"}) {
    HttpRequest r = ParseHttpRequest(request);
    EXPECT_EQ(r.refusal, 405) << request;
    EXPECT_EQ(r.reason, "only GET and HEAD are served\n");
  }
}

}  // namespace
}  // namespace kvpool::master
