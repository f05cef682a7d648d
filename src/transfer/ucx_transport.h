// UcxTransport: reaches segments of stores that serve UCX with one-sided reads and writes
// (ucp_get_nbx / ucp_put_nbx) straight between the caller's buffer and the segment, on
// whatever UCX finds: RDMA (verbs, RoCE), shared memory, tcp.
//
// Open fetches the segment's key (ucx_key.h) over a tcp control connection that proves the
// pool's secret like any other, and creates one UCX endpoint per store. Tier reads, and every
// request of a segment whose endpoint failed, go over tcp (`tcp`); such a channel reports
// broken() so the engine opens it afresh next time. A batch abandoned at its deadline closes
// its store's endpoint, cancelling what is in flight on it: the only way to be sure UCX
// touches its buffers no more (README.md, "UCX").
//
// No UCX types here: without UCX built, Start says so (ucx_absent.cc).
#pragma once

#include <memory>

#include "common/status.h"
#include "transfer/transport.h"

namespace kvpool::transfer {

class UcxTransport : public Transport {
 public:
  // UNAVAILABLE, saying why, when UCX cannot start with options.ucx (or is not built).
  // REQUIRES: `tcp` outlives the transport.
  static Result<std::unique_ptr<UcxTransport>> Start(const TransferOptions& options, Transport* tcp);
  std::string_view name() const override { return "ucx"; }
  // For the start-up log: which UCX, whether it can move CUDA memory.
  virtual std::string Describe() const = 0;
};

}  // namespace kvpool::transfer
