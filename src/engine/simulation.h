// Simulation: the replay's event loop in emulated time.
//
// Events run in time order (ties in scheduling order) on the calling thread; emulated time
// jumps from one event to the next, so compute costs nothing but the real work the handlers
// do (moving and verifying KV bytes). With speedup S > 0 the loop paces itself: an event at
// emulated time t runs no earlier than t / S wall seconds after Run began, which compresses
// trace waits and emulated compute together. S = 0 runs as fast as the real work allows.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace kvpool::engine {

class Simulation {
 public:
  explicit Simulation(double speedup = 0) : speedup_(speedup) {}
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  double now() const { return now_; }
  // Runs `fn` at emulated time max(time, now()).
  void At(double time, std::function<void()> fn);
  void After(double delay, std::function<void()> fn) { At(now_ + delay, std::move(fn)); }

  // Runs events until none are left or Stop() is called. `on_tick` (optional) is called
  // about every `tick` of wall time, e.g. for a progress line.
  void Run(const std::function<void()>& on_tick = {},
           std::chrono::milliseconds tick = std::chrono::milliseconds(500));
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  // How far the loop fell behind its pace (real work slower than speedup allows), seconds.
  double max_lag_s() const { return max_lag_s_; }
  uint64_t events_run() const { return events_run_; }

 private:
  struct Event {
    double time;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  const double speedup_;
  double now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t events_run_ = 0;
  bool stopped_ = false;
  double max_lag_s_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
};

}  // namespace kvpool::engine
