// HandoffSender: one prefill rank's side of a handoff to a decode instance in another process
// or on another host (the decode side is handoff_receiver.h, which says how a request moves).
//
// Send gathers each piece of the rank's part (a HandoffWrite: at most max_write_bytes, taken
// from the receiver) into a local buffer, waits for a landing slot, writes the piece into the
// receiver's landing segment through the transfer engine (shm when the receiver is on this
// host, else tcp), and announces it with its xxh3 checksum. It returns once the receiver says
// every piece of the part was scattered, or why not.
//
// Failure: a receiver that dies, or stops answering until the deadline, fails the request
// (UNAVAILABLE / TIMEOUT) and breaks the connection: every later Send fails at once with
// UNAVAILABLE; connect a new sender. The receiver's own refusals (NOT_FOUND for a request it
// does not expect, INVALID_ARGUMENT for other layouts) fail only that request. The local
// buffer is the sender's and is reused (for a cache in GPU memory: one staging buffer on that GPU
// and one page-locked host buffer, made on first use); nothing is left allocated per request.
// One Send at a time (calls are serialised).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "handoff/handoff_layouts.h"
#include "transfer/transfer_engine.h"

namespace kvpool::handoff {

struct HandoffSenderOptions {
  std::chrono::milliseconds connect_timeout{2000};
  // transfer.secret (the pool's --auth-file) is proven to the receiver's control socket too,
  // and a receiver that does not ask for it is refused (handoff_auth.h).
  transfer::TransferOptions transfer;
};

class HandoffSender {
 public:
  // Connects to the receiver at `address` as prefill rank `prefill_rank`; both sides must be
  // configured with the same layouts (checked per request).
  static Result<std::unique_ptr<HandoffSender>> Connect(const std::string& address, PrefillLayout prefill,
                                                        DecodeLayout decode, uint32_t prefill_rank,
                                                        HandoffSenderOptions options = {});
  ~HandoffSender();
  HandoffSender(const HandoffSender&) = delete;
  HandoffSender& operator=(const HandoffSender&) = delete;

  // Moves this rank's layers of tokens [first_token, end_token) of `request_id` from `cache`
  // (block table `table` over global tokens) to the decode ranks. `cuda_device` -1: the cache's
  // planes are host memory (gathered on the CPU); otherwise the CUDA device whose memory they are
  // (gathered there by the kernel into page-locked host memory, device_gather.h). A device cache
  // without CUDA, or whose planes are not that device's memory, fails the request before anything
  // is sent (UNAVAILABLE / INVALID_ARGUMENT); the connection stays usable.
  Status Send(uint64_t request_id, uint64_t first_token, uint64_t end_token, const PagedKvCache& cache,
              std::span<const BlockId> table, std::chrono::steady_clock::time_point deadline,
              int cuda_device = -1);

  // "shm" or "tcp": how pieces reach the landing segment.
  std::string transport() const;

 private:
  struct Impl;
  explicit HandoffSender(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::handoff
