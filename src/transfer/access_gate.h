// AccessGate: lets many threads touch a region of memory that one owner may retire at any
// moment, and tells the owner when the last touch has ended.
//
// Used twice: a batch's local buffers (the caller's Wait() may give up on them at its
// deadline while io threads are mid-copy) and a served segment (Withdraw() must return only
// once no io thread is still reading or writing it).
//
// Invariant: after Close() returns, Enter() fails and no Enter()..Exit() section is open,
// so the region is never touched again. Each section is one bounded step (a memcpy chunk or
// one non-blocking syscall), so Close() waits microseconds, never on a peer.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace kvpool::transfer {

class AccessGate {
 public:
  AccessGate() = default;
  AccessGate(const AccessGate&) = delete;
  AccessGate& operator=(const AccessGate&) = delete;

  // Starts a section. Returns false (and opens nothing) once Close() has begun.
  bool Enter() {
    uint64_t before = word_.fetch_add(1, std::memory_order_acquire);
    if (before & kClosedBit) {
      word_.fetch_sub(1, std::memory_order_release);
      return false;
    }
    return true;
  }
  // REQUIRES: paired with a successful Enter().
  void Exit() { word_.fetch_sub(1, std::memory_order_release); }

  // Refuses new sections and waits for open ones to end. Idempotent, thread-safe.
  void Close() {
    word_.fetch_or(kClosedBit, std::memory_order_acq_rel);
    while ((word_.load(std::memory_order_acquire) & ~kClosedBit) != 0) {
      std::this_thread::yield();
    }
  }

  bool closed() const { return (word_.load(std::memory_order_acquire) & kClosedBit) != 0; }

 private:
  static constexpr uint64_t kClosedBit = uint64_t{1} << 63;
  // Closed bit | number of open sections.
  std::atomic<uint64_t> word_{0};
};

// Scoped section; check entered() before touching the region.
class AccessSection {
 public:
  explicit AccessSection(AccessGate& gate) : gate_(gate), entered_(gate.Enter()) {}
  ~AccessSection() {
    if (entered_) gate_.Exit();
  }
  AccessSection(const AccessSection&) = delete;
  AccessSection& operator=(const AccessSection&) = delete;
  bool entered() const { return entered_; }

 private:
  AccessGate& gate_;
  bool entered_;
};

}  // namespace kvpool::transfer
