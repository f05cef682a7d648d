// HandoffReceiver: the decode side of a handoff between processes or hosts.
//
// The decode instance admits a request (its KV admission gate), allocates its blocks, and
// calls Expect with where the request's KV must land: one DecodeTarget (paged cache + block
// table over local tokens) per DCP rank. Every prefill rank then connects a HandoffSender and
// moves its part: for each piece (one HandoffWrite, at most one landing slot) it asks for a
// slot, writes the gathered bytes into the receiver's landing segment through the transfer
// engine (shm on one host, tcp across hosts), and announces the piece; the receiver checks the
// piece's xxh3 checksum, scatters it into the decode cache, and frees the slot. Each connection's
// thread checks and scatters its own pieces, so the prefill ranks' pieces of one request scatter
// in parallel (they write disjoint bytes). Poll says OK only once every prefill rank's every
// piece is scattered: then the request is ready.
//
// A decode cache may be host memory (scattered by the CPU) or CUDA device memory
// (DecodeTarget::cuda_device): then each checked piece is copied into a bounce slot on that GPU
// and scattered there by a kernel (DeviceScatter), and the slot is freed only once the kernel
// has finished, so "ready" means the bytes are in the GPU cache. The first request for a GPU
// allocates its bounce slots (2 × max_write_bytes) and page-locks the landing segment, so the
// copies are DMA; host-only receivers never touch CUDA.
//
// Bounded memory: the landing segment holds landing_bytes / max_write_bytes slots, reused.
// When none is free a slot request waits (back-pressure reaches the sender), it never fails
// unless the request's own time runs out.
//
// Failure (invariants):
//   * A prefill connection lost mid-part fails that request (UNAVAILABLE); its slots are
//     quarantined for slot_quarantine before reuse, as a write its sender queued may still land.
//   * A piece whose checksum does not match is never scattered; the request fails.
//   * Once Poll has answered (OK, error or TIMEOUT) or Cancel ran, nothing writes the
//     request's blocks again: the decode instance may reuse them at once. (Poll does not answer
//     while a piece of the request is being scattered; Cancel waits for those to finish.)
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/shared_secret.h"
#include "common/status.h"
#include "handoff/handoff_layouts.h"
#include "transfer/transfer_engine.h"  // UcxSettings

namespace kvpool::handoff {

struct HandoffReceiverOptions {
  std::string listen = "127.0.0.1:0";       // control socket, host:port (port 0: any)
  std::string data_listen = "127.0.0.1:0";  // the landing segment's tcp server
  std::string shm_socket_dir = "/tmp";      // same-host senders map the landing segment; "" => tcp only
  uint64_t landing_bytes = uint64_t{64} << 20;
  uint64_t max_write_bytes = uint64_t{8} << 20;  // slot size: the largest piece a sender may write
  // A request not ready this long after Expect is failed with TIMEOUT.
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds slot_quarantine{10000};
  // The pool's secret (--auth-file): every sender must prove it on the control socket
  // (handoff_auth.h) and on the landing segment's sockets. None: any sender is served.
  std::optional<SharedSecret> secret;
  // Serve the landing segment over UCX too (transfer/ucx_segments.h): senders given
  // transfer.ucx then write their pieces one-sided.
  transfer::UcxSettings ucx;
};

// Where one DCP rank keeps the request: its cache and the request's block table over the
// rank's local tokens (covering every local token of the request's range).
struct DecodeTarget {
  const PagedKvCache* cache = nullptr;
  std::vector<BlockId> table;
  // -1: the cache's planes are host memory. Otherwise the CUDA device whose memory they are.
  int cuda_device = -1;
};

struct HandoffReceiverStats {
  uint64_t pieces = 0;           // scattered
  uint64_t bytes = 0;            // scattered
  uint64_t ready_requests = 0;
  uint64_t failed_requests = 0;  // including timeouts
  uint64_t slot_waits = 0;       // slot requests that had to wait for a free slot
};

class HandoffReceiver {
 public:
  // Allocates the landing segment, serves it, starts listening.
  static Result<std::unique_ptr<HandoffReceiver>> Start(PrefillLayout prefill, DecodeLayout decode,
                                                        HandoffReceiverOptions options = {});
  // Stops listening, closes every connection (their requests fail) and joins its threads.
  ~HandoffReceiver();
  HandoffReceiver(const HandoffReceiver&) = delete;
  HandoffReceiver& operator=(const HandoffReceiver&) = delete;

  // "host:port" senders connect to.
  std::string address() const;

  // Expects tokens [first_token, end_token) of request `request_id`. INVALID_ARGUMENT for a
  // target count other than the DCP ranks, a block table that does not cover the rank's
  // tokens, a cuda_device below -1, or a device target whose planes are not that GPU's memory;
  // UNAVAILABLE for a device target without CUDA (built without KVPOOL_CUDA, no such device);
  // ALREADY_EXISTS while the id is in flight. On any error nothing is expected. REQUIRES: the
  // caches outlive the request (until Poll answers or Cancel returns).
  Status Expect(uint64_t request_id, uint64_t first_token, uint64_t end_token, std::vector<DecodeTarget> targets);
  // nullopt while in flight; else OK (ready) or why not. Answers once, then forgets the id.
  // Unknown ids: NOT_FOUND.
  std::optional<Status> Poll(uint64_t request_id);
  // Blocks until Poll would answer or `deadline`; at the deadline the request is cancelled
  // and TIMEOUT returned.
  Status Wait(uint64_t request_id, std::chrono::steady_clock::time_point deadline);
  // Gives up on a request: pieces still arriving are discarded.
  void Cancel(uint64_t request_id);

  HandoffReceiverStats stats() const;

 private:
  struct Impl;
  explicit HandoffReceiver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::handoff
