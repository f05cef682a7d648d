// The tcp wire format (documented in README.md, "tcp frames"). Fixed-size little-endian
// headers; a write request and an OK read response are followed by `length` raw bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/access_grant.h"
#include "common/status.h"

namespace kvpool::transfer {

inline constexpr uint32_t kFrameMagic = 0x5450564B;  // "KVPT" on the wire
inline constexpr uint8_t kFrameVersion = 2;  // 2: requests carry a grant
// The server closes a connection whose frame claims more payload than this.
inline constexpr uint64_t kMaxFramePayload = uint64_t{64} << 20;

// kReadTier: a read of the segment's store's SSD tier file (offset into the file), answered
// like a read. kUcxKey: asks for what reaching the segment over UCX takes (ucx_key.h),
// answered like a read of kUcxKeyBytes at offset 0 by a store that serves UCX.
enum class FrameOp : uint8_t { kRead = 1, kWrite = 2, kReadTier = 3, kUcxKey = 4 };
// Whether an OK response to `op` carries the request's bytes.
inline bool IsRead(FrameOp op) { return op != FrameOp::kWrite; }

struct RequestHeader {
  static constexpr size_t kSize = 40 + AccessGrant::kWireSize;
  FrameOp op = FrameOp::kRead;
  uint64_t request_id = 0;
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  AccessGrant grant;  // what a tenant's connection must show (common/access_grant.h); else ignored
};

struct ResponseHeader {
  static constexpr size_t kSize = 24;
  FrameOp op = FrameOp::kRead;
  StatusCode status = StatusCode::kOk;
  uint64_t request_id = 0;
  uint64_t length = 0;  // payload bytes that follow (read + OK: the requested length; else 0)
};

void EncodeRequestHeader(const RequestHeader& header, uint8_t out[RequestHeader::kSize]);
void EncodeResponseHeader(const ResponseHeader& header, uint8_t out[ResponseHeader::kSize]);

// Fail with INVALID_ARGUMENT on bad magic, version, op, reserved bits or length.
Status DecodeRequestHeader(const uint8_t in[RequestHeader::kSize], RequestHeader* header);
Status DecodeResponseHeader(const uint8_t in[ResponseHeader::kSize], ResponseHeader* header);

}  // namespace kvpool::transfer
