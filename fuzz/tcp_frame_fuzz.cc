// The tcp transport's frame headers, as a storage service (requests) and a client
// (responses) read them off a socket.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transfer/tcp_frame.h"

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
        back.segment_id != rq.segment_id || back.request_id != rq.request_id || back.op != rq.op) {
      std::abort();
    }
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
