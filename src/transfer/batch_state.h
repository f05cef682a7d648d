// BatchState: the shared bookkeeping of one submitted batch. Transports complete parts of
// requests from any thread; the caller's Wait() collects the outcome.
//
// A request may be split into parts (shm copy chunks, tcp frames); it finishes when its last
// part does, with the first error any part reported. Wait() freezes the results: a request
// that finished after the deadline, or not at all, reports TIMEOUT, and after Wait() returns
// no transport touches the batch's local buffers again (see AccessGate).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "transfer/access_gate.h"

namespace kvpool::transfer {

class BatchState {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit BatchState(size_t request_count);
  BatchState(const BatchState&) = delete;
  BatchState& operator=(const BatchState&) = delete;

  // Guards the local buffers of every request. Transports touch a buffer only inside an
  // AccessSection on this gate; a failed Enter() means the caller gave up on the batch.
  AccessGate& buffers() { return buffers_; }

  // Declares that request `index` completes in `parts` FinishPart calls (default 1).
  // REQUIRES: called before any part of that request is launched.
  void ExpectParts(size_t index, uint32_t parts);

  // Records the outcome of one part. Thread-safe; ignored once the batch is finalized.
  void FinishPart(size_t index, Status status);

  // True once every request has finished (non-blocking).
  bool Done() const { return pending_.load(std::memory_order_acquire) == 0; }

  // Blocks until every request finished or `deadline`, then finalizes (see class comment).
  // Returns OK iff every request succeeded by the deadline; TIMEOUT if any did not finish in
  // time; otherwise the first failing request's status. Later calls return the same.
  Status Wait(TimePoint deadline);

  // REQUIRES: Wait() returned. Index = position in the submitted span.
  const std::vector<Status>& results() const { return results_; }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  AccessGate buffers_;
  std::vector<Status> results_;           // first error per request; OK until one arrives
  std::vector<uint32_t> parts_left_;
  std::vector<TimePoint> finished_at_;
  std::atomic<size_t> pending_;           // requests with parts left
  bool finalized_ = false;
  Status overall_;
};

}  // namespace kvpool::transfer
