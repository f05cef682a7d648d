// A real MasterServer on loopback: gRPC round trips, /metrics, /health.
#include "master/master_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/test_http_client.h"
#include "master/pool_metadata.h"
#include "proto/lookup_reply.h"
#include "proto/master.grpc.pb.h"

namespace kvpool::master {
namespace {

using http::testing::HttpExchange;

class MasterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    auto started = MasterServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = proto::Master::NewStub(channel_);
  }

  uint64_t Mount(const std::string& store, uint64_t size) {
    grpc::ClientContext context;
    proto::MountSegmentRequest request;
    request.mutable_segment()->set_store_id(store);
    request.mutable_segment()->set_host_id("host-1");
    request.mutable_segment()->set_tcp_address("127.0.0.1:7000");
    request.mutable_segment()->set_size(size);
    proto::MountSegmentReply reply;
    EXPECT_TRUE(stub_->MountSegment(&context, request, &reply).ok());
    EXPECT_EQ(reply.code(), proto::OK) << reply.message();
    EXPECT_EQ(reply.heartbeat_ttl_ms(), 5000u);
    EXPECT_EQ(reply.max_lease_ms(), 60000u);
    return reply.segment_id();
  }

  std::unique_ptr<MasterServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Master::Stub> stub_;
};

TEST_F(MasterServerTest, PutGetExistsRemoveRoundTrip) {
  uint64_t a = Mount("store-a", 1 << 20);
  uint64_t b = Mount("store-b", 1 << 20);
  EXPECT_NE(a, b);

  {
    grpc::ClientContext context;
    proto::BatchPutStartRequest request;
    for (const char* key : {"k1", "k2"}) {
      auto* item = request.add_items();
      item->set_key(key);
      item->set_length(1000);
    }
    request.add_items()->set_key("");  // invalid, must not fail the batch
    request.mutable_options()->set_replicas(2);
    request.mutable_options()->set_group("g");
    proto::BatchPutStartReply reply;
    ASSERT_TRUE(stub_->BatchPutStart(&context, request, &reply).ok());
    ASSERT_EQ(reply.results_size(), 3);
    EXPECT_EQ(reply.results(0).code(), proto::OK) << reply.results(0).message();
    EXPECT_EQ(reply.results(0).replicas_size(), 2);
    EXPECT_EQ(reply.results(2).code(), proto::INVALID_ARGUMENT);
    EXPECT_EQ(reply.segments_size(), 2);
    EXPECT_EQ(reply.put_timeout_ms(), 30000u);
    for (const auto& segment : reply.segments()) EXPECT_EQ(segment.tcp_address(), "127.0.0.1:7000");
  }
  {
    grpc::ClientContext context;
    proto::BatchKeysRequest request;
    request.add_keys("k1");
    request.add_keys("k2");
    request.add_keys("never-started");
    proto::BatchKeysReply reply;
    ASSERT_TRUE(stub_->BatchPutEnd(&context, request, &reply).ok());
    ASSERT_EQ(reply.results_size(), 3);
    EXPECT_EQ(reply.results(0).code(), proto::OK);
    EXPECT_EQ(reply.results(2).code(), proto::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    proto::BatchKeysRequest request;
    request.add_keys("k1");
    request.add_keys("missing");
    proto::BatchExistsReply reply;
    ASSERT_TRUE(stub_->BatchExists(&context, request, &reply).ok());
    EXPECT_EQ(reply.exists(), std::string("\x01\x00", 2));
  }
  {
    grpc::ClientContext context;
    proto::BatchGetReplicasRequest request;
    request.add_keys("k2");
    request.add_keys("missing");
    request.set_lease_ms(2000);
    proto::BatchGetReplicasReply reply;
    ASSERT_TRUE(stub_->BatchGetReplicas(&context, request, &reply).ok());
    EXPECT_EQ(reply.lease_ms(), 2000u);
    auto entries = ReadLookupReply(reply, 2);
    ASSERT_TRUE(entries.ok()) << entries.status().ToString();
    EXPECT_EQ((*entries)[0].code, proto::OK);
    EXPECT_EQ((*entries)[0].length, 1000u);
    EXPECT_EQ((*entries)[0].replicas(), 2u);
    EXPECT_EQ((*entries)[1].code, proto::NOT_FOUND);
    EXPECT_NE((*entries)[1].message.find("missing"), std::string_view::npos);
    EXPECT_EQ(reply.segments_size(), 2);
  }
  {
    grpc::ClientContext context;
    proto::StatReply reply;
    ASSERT_TRUE(stub_->Stat(&context, proto::StatRequest(), &reply).ok());
    EXPECT_EQ(reply.objects(), 2u);
    EXPECT_EQ(reply.capacity_bytes(), 2u << 20);
    EXPECT_EQ(reply.used_bytes(), 4u * 1024);
    EXPECT_EQ(reply.hits(), 1u);
    EXPECT_EQ(reply.misses(), 1u);
    EXPECT_EQ(reply.segments_size(), 2);
  }
  {
    grpc::ClientContext context;
    proto::BatchKeysRequest request;
    request.add_keys("k1");
    proto::BatchKeysReply reply;
    ASSERT_TRUE(stub_->BatchRemove(&context, request, &reply).ok());
    EXPECT_EQ(reply.results(0).code(), proto::OK);
  }
  {
    grpc::ClientContext context;
    proto::HeartbeatRequest request;
    request.set_store_id("store-a");
    request.add_segment_ids(a);
    request.add_segment_ids(9999);
    proto::HeartbeatReply reply;
    ASSERT_TRUE(stub_->Heartbeat(&context, request, &reply).ok());
    ASSERT_EQ(reply.unknown_segment_ids_size(), 1);
    EXPECT_EQ(reply.unknown_segment_ids(0), 9999u);
  }
  {
    grpc::ClientContext context;
    proto::UnmountSegmentRequest request;
    request.set_segment_id(b);
    proto::UnmountSegmentReply reply;
    ASSERT_TRUE(stub_->UnmountSegment(&context, request, &reply).ok());
    EXPECT_EQ(reply.code(), proto::OK);
  }
}

TEST_F(MasterServerTest, BatchLargerThanGrpcDefaultLimit) {
  Mount("store-a", 1 << 20);
  grpc::ClientContext context;
  proto::BatchKeysRequest request;
  for (int i = 0; i < 2000; ++i) request.add_keys(std::string(4000, 'a' + i % 26) + std::to_string(i));
  proto::BatchExistsReply reply;
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto stub = proto::Master::NewStub(
      grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args));
  auto status = stub->BatchExists(&context, request, &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.exists(), std::string(2000, '\0'));
}

TEST_F(MasterServerTest, MetricsAndHealthEndpoints) {
  Mount("store-\"quoted\"", 1 << 20);
  {
    grpc::ClientContext context;
    proto::BatchKeysRequest request;
    request.add_keys("x");
    proto::BatchExistsReply reply;
    ASSERT_TRUE(stub_->BatchExists(&context, request, &reply).ok());
  }
  {
    grpc::ClientContext context;
    proto::BatchGetReplicasRequest request;
    request.add_keys("tenant-a/missing");
    proto::BatchGetReplicasReply reply;
    ASSERT_TRUE(stub_->BatchGetReplicas(&context, request, &reply).ok());
  }
  ASSERT_GT(server_->metrics_port(), 0);
  std::string health = HttpExchange(server_->metrics_port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << health;
  EXPECT_NE(health.find("\r\n\r\nok\n"), std::string::npos);

  std::string metrics = HttpExchange(server_->metrics_port(), "GET /metrics HTTP/1.1\r\n\r\n");
  const std::string segment_series = fmt::format(
      "kvpool_master_segment_used_bytes{{segment=\"{}\",store=\"store-\\\"quoted\\\"\"}} 0",
      server_->pool()->Stat().segments.at(0).info.id);
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << metrics;
  for (const char* series :
       {"kvpool_master_objects 0", "kvpool_master_capacity_bytes 1048576",
        segment_series.c_str(),
        "kvpool_master_evicted_objects_total 0", "kvpool_master_hits_total 0",
        "kvpool_master_namespace_misses_total{namespace=\"tenant-a\",part=\"0\"} 1",
        "kvpool_master_rpc_total{method=\"BatchExists\"} 1",
        "kvpool_master_rpc_total{method=\"MountSegment\"} 1",
        "kvpool_master_rpc_latency_seconds_count{method=\"BatchExists\"} 1",
        "kvpool_master_rpc_latency_seconds_bucket{method=\"BatchExists\",le=\"+Inf\"} 1"}) {
    EXPECT_NE(metrics.find(series), std::string::npos) << series << "\n" << metrics;
  }

  EXPECT_EQ(HttpExchange(server_->metrics_port(), "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(HttpExchange(server_->metrics_port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
}

TEST_F(MasterServerTest, PortInUseIsAClearError) {
  MasterOptions options;
  options.listen = server_->address();
  options.metrics_listen = "";
  auto second = MasterServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("already in use"), std::string::npos)
      << second.status().ToString();

  MasterOptions metrics_clash;
  metrics_clash.listen = "127.0.0.1:0";
  metrics_clash.metrics_listen = "127.0.0.1:" + std::to_string(server_->metrics_port());
  auto third = MasterServer::Start(metrics_clash);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("Address already in use"), std::string::npos)
      << third.status().ToString();
}

TEST(MasterServerOptionsTest, RejectsBadOptions) {
  MasterOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.high_watermark = 1.5;
  EXPECT_EQ(MasterServer::Start(options).status().code(), StatusCode::kInvalidArgument);
  options.high_watermark = 0.9;
  options.listen = "no-port";
  EXPECT_EQ(MasterServer::Start(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(MasterServerShutdownTest, WaitReturnsAfterShutdown) {
  MasterOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  auto server = MasterServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::thread waiter([&] { (*server)->Wait(); });
  (*server)->Shutdown();
  waiter.join();
  (*server)->Shutdown();  // idempotent
}

}  // namespace
}  // namespace kvpool::master
