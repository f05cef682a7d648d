// Simulation: the replay's event loop in emulated time.
//
// Events run in time order (ties in scheduling order) on the calling thread; emulated time
// jumps from one event to the next, so compute costs nothing but the real work the handlers
// do (moving and verifying KV bytes). With speedup S > 0 the loop paces itself: an event at
// emulated time t runs no earlier than t / S wall seconds after Run began, which compresses
// trace waits and emulated compute together. S = 0 runs as fast as the real work allows.
//
// clock() is the same time as a kvpool::Clock, for the pool under the replay: its timers
// (the master's maintenance passes, the stores' heartbeats) run as background events of this
// loop, which keep it going only while other events are left. So the pool's leases, recency,
// retention and eviction move with emulated time, at points the seed decides, whatever the
// machine's speed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "common/clock.h"

namespace kvpool::engine {

class Simulation;

// A Simulation's time as a Clock: NowNs is one second plus the emulated time (a clock that
// starts above zero, like ManualClock). Every() runs its task as background events.
// REQUIRES for its timers: RunSoon and the Timer's destruction on the loop's thread, or while
// the loop is not running.
class SimulationClock final : public Clock {
 public:
  explicit SimulationClock(Simulation* sim) : sim_(sim) {}
  int64_t NowNs() const override;
  std::unique_ptr<Timer> Every(std::chrono::nanoseconds period, std::function<void()> task) override;

 private:
  Simulation* const sim_;
};

class Simulation {
 public:
  explicit Simulation(double speedup = 0) : speedup_(speedup), clock_(this) {}
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Emulated seconds. Other threads may read it (the pool's, through clock()).
  double now() const { return now_.load(std::memory_order_relaxed); }
  // Runs `fn` at emulated time max(time, now()).
  void At(double time, std::function<void()> fn) { Schedule(time, std::move(fn), /*background=*/false); }
  void After(double delay, std::function<void()> fn) { At(now() + delay, std::move(fn)); }
  // Like At, but an event that does not keep Run going: Run returns when only such are left.
  void AtBackground(double time, std::function<void()> fn) { Schedule(time, std::move(fn), /*background=*/true); }

  // Runs events until no foreground event is left or Stop() is called. `on_tick` (optional) is called
  // about every `tick` of wall time, e.g. for a progress line.
  void Run(const std::function<void()>& on_tick = {},
           std::chrono::milliseconds tick = std::chrono::milliseconds(500));
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  // How far the loop fell behind its pace (real work slower than speedup allows), seconds.
  double max_lag_s() const { return max_lag_s_; }
  uint64_t events_run() const { return events_run_; }
  Clock* clock() { return &clock_; }

 private:
  struct Event {
    double time;
    uint64_t seq;
    bool background;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  void Schedule(double time, std::function<void()> fn, bool background);

  const double speedup_;
  std::atomic<double> now_{0};  // written by the loop's thread only
  uint64_t next_seq_ = 0;
  uint64_t events_run_ = 0;
  uint64_t foreground_pending_ = 0;
  bool stopped_ = false;
  double max_lag_s_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  SimulationClock clock_;
};

}  // namespace kvpool::engine
