// Time behind an interface, so lease, heartbeat, eviction and put-timeout logic can run on
// controlled time (tests) or emulated time (the replay) instead of the wall clock.
//
// One clock serves a whole pool: its time (NowNs) and its periodic work (Every). Servers take
// a Clock* and read nothing else for the logic they decide on; what bounds a blocked call
// (an RPC's or a transfer's deadline, a hang guard) stays on real time, since a simulation's
// time does not move while its thread waits on that call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace kvpool {

// A task a Clock runs every period until the Timer is destroyed.
class Timer {
 public:
  // Stops the task; waits for a run in progress (so what the task uses may go next).
  virtual ~Timer() = default;
  // Runs the task as soon as it can, out of turn (a change it should act on at once).
  virtual void RunSoon() = 0;
};

// Monotonic time in nanoseconds. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
  int64_t NowMs() const { return NowNs() / 1'000'000; }

  // Runs `task` every `period` of this clock's time, the first time one period from now.
  // This default runs it on a thread of the timer's own, every `period` of real time: right
  // for the steady clock, and for a manual clock whose servers should keep working while a
  // test moves time. A simulated clock runs it as events of its loop, on the loop's thread,
  // so a task must never wait for another task of the same clock.
  // REQUIRES: period > 0; the Timer is destroyed before this clock.
  virtual std::unique_ptr<Timer> Every(std::chrono::nanoseconds period, std::function<void()> task);
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

// Time moves only when a test says so (its timers still run on real time: see Every).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_.load(std::memory_order_relaxed); }
  void AdvanceMs(int64_t ms) { now_ns_.fetch_add(ms * 1'000'000, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace kvpool
