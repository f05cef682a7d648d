#include "transfer/tcp_frame.h"

#include <cstring>

#include <gtest/gtest.h>

namespace kvpool::transfer {
namespace {

TEST(TcpFrameTest, RequestHeaderRoundTrips) {
  RequestHeader in;
  in.op = FrameOp::kWrite;
  in.request_id = 0x0102030405060708ull;
  in.segment_id = 42;
  in.offset = 1ull << 40;
  in.length = 4 << 20;
  in.grant = {1'800'000'000'000, 1ull << 39, 1ull << 41, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
  uint8_t wire[RequestHeader::kSize];
  EncodeRequestHeader(in, wire);
  EXPECT_EQ(std::memcmp(wire, "KVPT", 4), 0);  // magic reads "KVPT" on the wire
  RequestHeader out;
  ASSERT_TRUE(DecodeRequestHeader(wire, &out).ok());
  EXPECT_EQ(out.op, FrameOp::kWrite);
  EXPECT_EQ(out.request_id, in.request_id);
  EXPECT_EQ(out.segment_id, 42u);
  EXPECT_EQ(out.offset, in.offset);
  EXPECT_EQ(out.length, in.length);
  EXPECT_EQ(out.grant.expiry_unix_ms, in.grant.expiry_unix_ms);
  EXPECT_EQ(out.grant.offset, in.grant.offset);
  EXPECT_EQ(out.grant.length, in.grant.length);
  EXPECT_EQ(out.grant.mac, in.grant.mac);
}

TEST(TcpFrameTest, ResponseHeaderRoundTrips) {
  ResponseHeader in;
  in.op = FrameOp::kRead;
  in.status = StatusCode::kStale;
  in.request_id = 9;
  in.length = 0;
  uint8_t wire[ResponseHeader::kSize];
  EncodeResponseHeader(in, wire);
  ResponseHeader out;
  ASSERT_TRUE(DecodeResponseHeader(wire, &out).ok());
  EXPECT_EQ(out.status, StatusCode::kStale);
  EXPECT_EQ(out.request_id, 9u);
}

TEST(TcpFrameTest, RejectsMalformedRequests) {
  RequestHeader in;
  in.length = 100;
  uint8_t good[RequestHeader::kSize];
  EncodeRequestHeader(in, good);
  RequestHeader out;

  uint8_t bad[RequestHeader::kSize];
  std::memcpy(bad, good, sizeof(bad));
  bad[0] ^= 1;  // magic
  EXPECT_EQ(DecodeRequestHeader(bad, &out).code(), StatusCode::kInvalidArgument);
  std::memcpy(bad, good, sizeof(bad));
  bad[4] = 1;  // version 1: headers without grants
  EXPECT_FALSE(DecodeRequestHeader(bad, &out).ok());
  std::memcpy(bad, good, sizeof(bad));
  bad[5] = 7;  // op
  EXPECT_FALSE(DecodeRequestHeader(bad, &out).ok());
  std::memcpy(bad, good, sizeof(bad));
  bad[6] = 1;  // reserved
  EXPECT_FALSE(DecodeRequestHeader(bad, &out).ok());

  in.length = kMaxFramePayload + 1;  // oversized
  EncodeRequestHeader(in, bad);
  EXPECT_FALSE(DecodeRequestHeader(bad, &out).ok());
}

TEST(TcpFrameTest, RejectsUnknownStatusCode) {
  ResponseHeader in;
  uint8_t wire[ResponseHeader::kSize];
  EncodeResponseHeader(in, wire);
  wire[6] = 200;
  ResponseHeader out;
  EXPECT_FALSE(DecodeResponseHeader(wire, &out).ok());
}

}  // namespace
}  // namespace kvpool::transfer
