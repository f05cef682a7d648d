// Clock behind an interface so lease, heartbeat and put-timeout logic can be tested
// with controlled time instead of sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvpool {

// Monotonic time in nanoseconds. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
  int64_t NowMs() const { return NowNs() / 1'000'000; }
};

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // Process-wide instance.
  static SteadyClock* Get() {
    static SteadyClock clock;
    return &clock;
  }
};

// Wall-clock milliseconds since the Unix epoch: what outlives one process (the stores' copy
// of the index, ids that a restarted master must not repeat). Not for measuring intervals.
inline int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Time moves only when a test says so.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_.load(std::memory_order_relaxed); }
  void AdvanceMs(int64_t ms) { now_ns_.fetch_add(ms * 1'000'000, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace kvpool
