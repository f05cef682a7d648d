// Transport: one way of moving bytes to and from segments (shm, tcp; later RDMA, CUDA).
//
// The engine asks a transport to Open a segment once (control path: may connect, map,
// resolve) and gets a SegmentChannel; every batch then goes through Channel::Submit (data
// path: never blocks on a peer). A channel is shared by all threads and stays usable until
// the last reference drops, so in-flight work keeps whatever it maps or connects alive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "common/status.h"
#include "transfer/batch_state.h"
#include "transfer/transfer_engine.h"

namespace kvpool::transfer {

// One request of a batch, already validated by the engine (segment known, in bounds,
// length > 0), with its position in the batch.
struct ChannelOp {
  OpKind kind = OpKind::kRead;
  char* local = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
  size_t index = 0;
  AccessGrant grant;  // TransferRequest::grant
  uint64_t* checksum = nullptr;  // TransferRequest::checksum: the channel hashes the op as it lands
  bool from_tier = false;        // TransferRequest::from_tier (a read; offset is into the tier file)
};

class SegmentChannel {
 public:
  // The segment's bytes mapped into this process (shm), or null when this transport does not
  // map them (tcp). The mapping stays valid while the returned pointer is held.
  virtual std::shared_ptr<const SegmentMapping> Mapping() { return nullptr; }
  virtual ~SegmentChannel() = default;
  virtual std::string_view transport_name() const = 0;
  // True once the channel fell back to a lesser route for good (ucx whose endpoint failed):
  // OpenSegment then opens the segment afresh instead of keeping it.
  virtual bool broken() const { return false; }
  // Bytes addressable in the segment (0 = unknown here; the far side checks bounds).
  virtual uint64_t size() const = 0;
  // Starts the ops. Each op's parts complete through batch->FinishPart exactly once, possibly
  // before Submit returns, possibly on another thread. Touches local buffers only inside
  // sections of batch->buffers(). Thread-safe.
  virtual void Submit(std::span<const ChannelOp> ops, const std::shared_ptr<BatchState>& batch) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // Prepares a channel to `endpoint`'s segment, or says why this transport cannot reach it.
  virtual Result<std::shared_ptr<SegmentChannel>> Open(const SegmentEndpoint& endpoint) = 0;
};

}  // namespace kvpool::transfer
