#include "transfer/tcp_frame.h"

#include <fmt/format.h>

#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {

Status CheckPrefix(const uint8_t* in, FrameOp* op) {
  if (GetField<uint32_t>(in, 0) != kFrameMagic) return InvalidArgument("bad frame magic");
  if (in[4] != kFrameVersion) return InvalidArgument(fmt::format("unsupported frame version {}", in[4]));
  if (in[5] < static_cast<uint8_t>(FrameOp::kRead) || in[5] > static_cast<uint8_t>(FrameOp::kUcxKey)) {
    return InvalidArgument(fmt::format("unknown frame op {}", in[5]));
  }
  *op = static_cast<FrameOp>(in[5]);
  return Status::Ok();
}

}  // namespace

// Request: magic u32 | version u8 | op u8 | reserved u16 (0) | request_id u64 |
//          segment_id u64 | offset u64 | length u64 | grant (40 bytes, EncodeGrant)
void EncodeRequestHeader(const RequestHeader& h, uint8_t out[RequestHeader::kSize]) {
  PutField<uint32_t>(out, 0, kFrameMagic);
  out[4] = kFrameVersion;
  out[5] = static_cast<uint8_t>(h.op);
  PutField<uint16_t>(out, 6, 0);
  PutField<uint64_t>(out, 8, h.request_id);
  PutField<uint64_t>(out, 16, h.segment_id);
  PutField<uint64_t>(out, 24, h.offset);
  PutField<uint64_t>(out, 32, h.length);
  EncodeGrant(h.grant, out + 40);
}

Status DecodeRequestHeader(const uint8_t in[RequestHeader::kSize], RequestHeader* h) {
  KVPOOL_RETURN_IF_ERROR(CheckPrefix(in, &h->op));
  if (GetField<uint16_t>(in, 6) != 0) return InvalidArgument("reserved request bits set");
  h->request_id = GetField<uint64_t>(in, 8);
  h->segment_id = GetField<uint64_t>(in, 16);
  h->offset = GetField<uint64_t>(in, 24);
  h->length = GetField<uint64_t>(in, 32);
  h->grant = DecodeGrant(in + 40);
  if (h->length > kMaxFramePayload) {
    return InvalidArgument(fmt::format("frame length {} exceeds {}", h->length, kMaxFramePayload));
  }
  return Status::Ok();
}

// Response: magic u32 | version u8 | op u8 | status u16 | request_id u64 | length u64
void EncodeResponseHeader(const ResponseHeader& h, uint8_t out[ResponseHeader::kSize]) {
  PutField<uint32_t>(out, 0, kFrameMagic);
  out[4] = kFrameVersion;
  out[5] = static_cast<uint8_t>(h.op);
  PutField<uint16_t>(out, 6, static_cast<uint16_t>(h.status));
  PutField<uint64_t>(out, 8, h.request_id);
  PutField<uint64_t>(out, 16, h.length);
}

Status DecodeResponseHeader(const uint8_t in[ResponseHeader::kSize], ResponseHeader* h) {
  KVPOOL_RETURN_IF_ERROR(CheckPrefix(in, &h->op));
  uint16_t status = GetField<uint16_t>(in, 6);
  if (status > static_cast<uint16_t>(kHighestStatusCode)) {
    return InvalidArgument(fmt::format("unknown status code {}", status));
  }
  h->status = static_cast<StatusCode>(status);
  h->request_id = GetField<uint64_t>(in, 8);
  h->length = GetField<uint64_t>(in, 16);
  if (h->length > kMaxFramePayload) {
    return InvalidArgument(fmt::format("response length {} exceeds {}", h->length, kMaxFramePayload));
  }
  return Status::Ok();
}

}  // namespace kvpool::transfer
