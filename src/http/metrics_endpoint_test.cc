// MetricsEndpoint over real sockets: GET and HEAD answered from the handler, other methods
// refused, malformed and oversized requests refused while the endpoint keeps serving, and
// clients that connect and send nothing (or half a request) do not stall a probe.
#include "http/metrics_endpoint.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/test_http_client.h"

namespace kvpool::http {
namespace {

using testing::ConnectLoopback;
using testing::HttpExchange;

HttpResponse Answer(std::string_view path) {
  if (path == "/health") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/metrics") return {200, kPrometheusContentType, "kvpool_test_total 7\n"};
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A long read timeout: the slow clients below must still be held when the probe answers.
    auto e = MetricsEndpoint::Start("127.0.0.1:0", Answer, {.threads = 4, .read_timeout_ms = 60'000});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    endpoint_ = std::move(e).value();
  }
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

TEST_F(MetricsEndpointTest, AnswersGetAndHeadAndRefusesOtherMethods) {
  const std::string metrics = HttpExchange(endpoint_->port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << metrics;
  EXPECT_NE(metrics.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\r\n\r\nkvpool_test_total 7\n"), std::string::npos) << metrics;
  const std::string head = HttpExchange(endpoint_->port(), "HEAD /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_EQ(head.find("ok\n"), std::string::npos) << head;  // no body
  EXPECT_EQ(HttpExchange(endpoint_->port(), "GET /nope HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(HttpExchange(endpoint_->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").rfind("HTTP/1.1 405", 0),
            0u);
}

TEST(MetricsEndpoint, MalformedAndOversizedRequestsAreRefusedAndServingGoesOn) {
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", Answer);
  ASSERT_TRUE(endpoint.ok());
  const int port = (*endpoint)->port();
  for (const std::string& junk :
       {std::string("GARBAGE\r\n\r\n"), std::string("\x00\x01\x02\xff\r\n\r\n", 8), std::string("GET metrics HTTP/1.1\r\n\r\n"),
        std::string("GET /metrics SPDY/9\r\n\r\n"), "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n",
        "GET /health HTTP/1.1\r\nX: " + std::string(20000, 'b') + "\r\n\r\n", std::string("GET /health\r\n")}) {
    const std::string answer = HttpExchange(port, junk);
    // A 4xx, or the connection closed unanswered: never a 200, never a hang.
    EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.1 4", 0) == 0) << junk.substr(0, 40) << "\n" << answer;
  }
  const std::string health = HttpExchange(port, "GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK", 0), 0u) << health;
}

TEST_F(MetricsEndpointTest, ClientsThatSendNothingDoNotStallAProbe) {
  // Three connections that never finish their requests hold three of the four threads...
  std::vector<int> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(ConnectLoopback(endpoint_->port()));
    if (i > 0) (void)!write(slow.back(), "GET /health HTTP/1.1\r\n", 22);
  }
  // ...and a probe is answered all the same,
  const std::string health = HttpExchange(endpoint_->port(), "GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK", 0), 0u) << health;
  // while they are still held (not closed by the endpoint: nothing to read yet).
  for (int fd : slow) {
    char c;
    EXPECT_EQ(recv(fd, &c, 1, MSG_DONTWAIT), -1);
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
    close(fd);
  }
}

TEST(MetricsEndpoint, ABadOrBusyAddressIsAClearError) {
  EXPECT_EQ(MetricsEndpoint::Start("no-port", Answer).status().code(), StatusCode::kInvalidArgument);
  auto first = MetricsEndpoint::Start("127.0.0.1:0", Answer);
  ASSERT_TRUE(first.ok());
  auto second = MetricsEndpoint::Start("127.0.0.1:" + std::to_string((*first)->port()), Answer);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("127.0.0.1:"), std::string::npos) << second.status().ToString();
}

TEST(MetricsEndpoint, StopsAtOnceEvenRightAfterStarting) {
  for (int i = 0; i < 20; ++i) {
    auto e = MetricsEndpoint::Start("127.0.0.1:0", Answer);
    ASSERT_TRUE(e.ok());
    (*e)->Shutdown();
  }
}

}  // namespace
}  // namespace kvpool::http
