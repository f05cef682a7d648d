// The tcp transport's frame headers, as a storage service (requests, with the grant a
// tenant's request carries: common/access_grant.h) and a client (responses) read them off a
// socket.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transfer/tcp_frame.h"

using namespace kvpool;
using namespace kvpool::transfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t request[RequestHeader::kSize] = {};
  std::memcpy(request, data, std::min(size, sizeof request));
  RequestHeader rq;
  if (DecodeRequestHeader(request, &rq).ok()) {
    // A header that decodes is one the encoder writes byte for byte, within the payload cap.
    if (rq.length > kMaxFramePayload) std::abort();
    uint8_t again[RequestHeader::kSize];
    EncodeRequestHeader(rq, again);
    RequestHeader back;
    if (!DecodeRequestHeader(again, &back).ok() || back.length != rq.length || back.offset != rq.offset ||
        back.segment_id != rq.segment_id || back.request_id != rq.request_id || back.op != rq.op ||
        back.grant.expiry_unix_ms != rq.grant.expiry_unix_ms || back.grant.offset != rq.grant.offset ||
        back.grant.length != rq.grant.length || back.grant.mac != rq.grant.mac) {
      std::abort();
    }
    // What a store does with a tenant's frame: the grant is the pool's exactly when the master
    // would have issued those bytes, and then it is judged on its range and expiry alone.
    static const SharedSecret pool = SharedSecret::FromBytes("the fuzzer's secret, 32 bytes ..");
    const GrantOp op = rq.op == FrameOp::kRead ? GrantOp::kRead : GrantOp::kWrite;
    const Status granted = CheckGrant(pool, rq.grant, op, rq.segment_id, rq.offset, rq.length, 1'800'000'000'000);
    const AccessGrant issued =
        IssueGrant(pool, op, rq.segment_id, rq.grant.offset, rq.grant.length, rq.grant.expiry_unix_ms);
    if (granted.ok() && (issued.mac != rq.grant.mac || rq.grant.empty())) std::abort();
  }
  uint8_t response[ResponseHeader::kSize] = {};
  if (size > RequestHeader::kSize) {
    std::memcpy(response, data + RequestHeader::kSize, std::min(size - RequestHeader::kSize, sizeof response));
  } else {
    std::memcpy(response, data, std::min(size, sizeof response));
  }
  ResponseHeader rs;
  if (DecodeResponseHeader(response, &rs).ok() && rs.length > kMaxFramePayload) std::abort();
  return 0;
}
