// ShmTransport: same-host segments, reached by mapping the store's memfd (obtained once over
// its unix socket, see shm_protocol.h) and copying with memcpy. No socket on the data path.
//
// Copies of a batch below kShmInlineBytes run on the submitting thread; larger batches are
// cut into chunks that the submitting thread and the HelperPool helpers claim in parallel, so
// Submit returns once every chunk is claimed. Before and after each copy the channel checks
// the segment's served flag: a withdrawn segment reports STALE, and the next batch asks the
// store again (remapping if the store now serves that id from new memory).
#pragma once

#include <memory>
#include <string_view>

#include "common/helper_pool.h"
#include "transfer/transport.h"

namespace kvpool::transfer {

class ShmTransport final : public Transport {
 public:
  // Total bytes of a batch below which copies stay on the submitting thread.
  static constexpr uint64_t kShmInlineBytes = 256 << 10;

  explicit ShmTransport(const TransferOptions& options);
  std::string_view name() const override { return "shm"; }
  Result<std::shared_ptr<SegmentChannel>> Open(const SegmentEndpoint& endpoint) override;

 private:
  TransferOptions options_;
  std::shared_ptr<HelperPool> pool_;  // shared with channels, which may outlive this transport
};

}  // namespace kvpool::transfer
