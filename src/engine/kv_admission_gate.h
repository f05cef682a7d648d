// KvAdmissionGate: bounds the KV tokens a decode instance has promised to hold.
//
// A request reserves its prompt + output tokens before prefill starts, so prefill never
// computes KV that decode has no room for. A request that does not fit waits in FIFO order
// (no overtaking: a large request is not starved by small ones) until finished requests
// release their tokens; it never fails for lack of room, only when the caller's timeout
// runs out (Cancel). Single-threaded (the replay's event loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace kvpool::engine {

class KvAdmissionGate {
 public:
  explicit KvAdmissionGate(uint64_t capacity_tokens) : capacity_(capacity_tokens) {}

  // True: admitted now (tokens reserved). False: queued; a later Release admits it.
  // REQUIRES: tokens <= capacity() (the caller rejects larger requests).
  bool Admit(uint64_t request_id, uint64_t tokens);
  // Returns `tokens` and admits waiting requests that now fit, in FIFO order; returns them.
  std::vector<uint64_t> Release(uint64_t tokens);
  // Drops a waiting request (its wait timed out). False if it was not waiting. Requests
  // queued behind it that now fit are admitted and appended to *admitted.
  bool Cancel(uint64_t request_id, std::vector<uint64_t>* admitted);

  uint64_t capacity() const { return capacity_; }
  uint64_t reserved() const { return reserved_; }
  uint64_t waiting_tokens() const { return waiting_tokens_; }
  size_t waiting() const { return waiting_.size(); }

 private:
  struct Waiter {
    uint64_t id;
    uint64_t tokens;
  };
  const uint64_t capacity_;
  uint64_t reserved_ = 0;
  uint64_t waiting_tokens_ = 0;
  std::deque<Waiter> waiting_;
};

}  // namespace kvpool::engine
