// The UCX key reply: its wire format, and what a store answers to op 4 (from the wire).
#include "transfer/ucx_key.h"

#include <sys/socket.h>

#include <gtest/gtest.h>

#include "transfer/memfd_region.h"
#include "transfer/segment_server.h"
#include "transfer/socket_util.h"
#include "transfer/tcp_frame.h"

namespace kvpool::transfer {
namespace {

UcxSegmentKey SomeKey() {
  UcxSegmentKey key;
  key.base = 0x7f0000001000;
  key.size = 64 << 20;
  key.worker_address = {1, 2, 3, 4, 5, 6, 7};
  key.rkey = {9, 8, 7};
  return key;
}

TEST(UcxKeyTest, RoundTripsInAFixedSizeReply) {
  std::vector<uint8_t> wire;
  ASSERT_TRUE(EncodeUcxKey(SomeKey(), &wire).ok());
  ASSERT_EQ(wire.size(), kUcxKeyBytes);
  UcxSegmentKey back;
  ASSERT_TRUE(DecodeUcxKey(wire, &back).ok());
  EXPECT_EQ(back.base, SomeKey().base);
  EXPECT_EQ(back.size, SomeKey().size);
  EXPECT_EQ(back.worker_address, SomeKey().worker_address);
  EXPECT_EQ(back.rkey, SomeKey().rkey);
}

TEST(UcxKeyTest, WhatDoesNotFitOrIsNotAKeyIsRefused) {
  UcxSegmentKey huge = SomeKey();
  huge.rkey.assign(kUcxKeyBytes, 1);
  std::vector<uint8_t> wire;
  EXPECT_EQ(EncodeUcxKey(huge, &wire).code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(EncodeUcxKey(SomeKey(), &wire).ok());
  UcxSegmentKey out;
  auto refused = [&](std::vector<uint8_t> bad) { return DecodeUcxKey(bad, &out).code() == StatusCode::kInvalidArgument; };
  EXPECT_TRUE(refused(std::vector<uint8_t>(wire.begin(), wire.end() - 1)));  // short
  for (size_t at : {0, 4, 5}) {  // magic, version, reserved
    auto bad = wire;
    bad[at] ^= 0xff;
    EXPECT_TRUE(refused(bad)) << at;
  }
  auto no_rkey = wire;
  no_rkey[28] = no_rkey[29] = no_rkey[30] = no_rkey[31] = 0;
  EXPECT_TRUE(refused(no_rkey));
  auto overrun = wire;
  overrun[24] = 0xff;
  overrun[25] = 0x0f;  // an address of 0xfff bytes runs past the reply
  EXPECT_TRUE(refused(overrun));
  auto wraps = wire;
  for (int i = 16; i < 24; ++i) wraps[i] = 0xff;  // base + size wraps
  EXPECT_TRUE(refused(wraps));
}

// Asks `server` for segment `id`'s key with a hand-built frame; returns the answer's status.
StatusCode AskForKey(const SegmentServer& server, uint64_t id, uint64_t length, std::vector<uint8_t>* reply) {
  auto fd = ConnectTcp(server.tcp_address(), std::chrono::steady_clock::now() + std::chrono::seconds(10));
  EXPECT_TRUE(fd.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  RequestHeader request;
  request.op = FrameOp::kUcxKey;
  request.request_id = 5;
  request.segment_id = id;
  request.length = length;
  uint8_t out[RequestHeader::kSize];
  EncodeRequestHeader(request, out);
  EXPECT_TRUE(WriteExactly(fd->get(), out, sizeof(out), deadline));
  uint8_t in[ResponseHeader::kSize];
  ResponseHeader response;
  EXPECT_TRUE(ReadExactly(fd->get(), in, sizeof(in), deadline));
  EXPECT_TRUE(DecodeResponseHeader(in, &response).ok());
  EXPECT_EQ(response.request_id, 5u);
  reply->resize(response.length);
  EXPECT_TRUE(ReadExactly(fd->get(), reply->data(), reply->size(), deadline));
  return response.status;
}

// A store without UCX answers UNAVAILABLE (the client then uses tcp), an unknown segment
// STALE, a malformed ask INVALID_ARGUMENT; one with UCX answers the segment's key.
TEST(UcxKeyTest, WhatAStoreAnswers) {
  auto region = MemfdRegion::Create(1 << 20).value();
  auto plain = SegmentServer::Start({}).value();
  plain->Serve({4, region->data(), region->size(), -1});
  std::vector<uint8_t> reply;
  EXPECT_EQ(AskForKey(*plain, 4, kUcxKeyBytes, &reply), StatusCode::kUnavailable);
  EXPECT_TRUE(reply.empty());
  EXPECT_EQ(AskForKey(*plain, 5, kUcxKeyBytes, &reply), StatusCode::kStale);
  EXPECT_EQ(AskForKey(*plain, 4, 100, &reply), StatusCode::kInvalidArgument);
  if (!UcxBuilt()) GTEST_SKIP() << "built without UCX";

  SegmentServerOptions options;
  options.ucx = {true, "tcp", "lo"};
  auto server = SegmentServer::Start(options).value();
  EXPECT_NE(server->ucx_description(), "");
  server->Serve({4, region->data(), region->size(), -1});
  ASSERT_EQ(AskForKey(*server, 4, kUcxKeyBytes, &reply), StatusCode::kOk);
  UcxSegmentKey key;
  ASSERT_TRUE(DecodeUcxKey(reply, &key).ok());
  EXPECT_EQ(key.base, reinterpret_cast<uint64_t>(region->data()));
  EXPECT_EQ(key.size, region->size());
  server->Withdraw(4);
  EXPECT_EQ(AskForKey(*server, 4, kUcxKeyBytes, &reply), StatusCode::kStale);
}

TEST(UcxKeyTest, AStoreAskedForAnUnknownTransportSaysWhy) {
  if (!UcxBuilt()) GTEST_SKIP() << "built without UCX";
  SegmentServerOptions options;
  options.ucx = {true, "no_such_transport", ""};
  auto server = SegmentServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(server.status().message().find("UCX"), std::string::npos) << server.status().ToString();
}

}  // namespace
}  // namespace kvpool::transfer
