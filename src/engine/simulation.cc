#include "engine/simulation.h"

#include <algorithm>
#include <thread>

namespace kvpool::engine {

void Simulation::At(double time, std::function<void()> fn) {
  events_.push(Event{std::max(time, now_), next_seq_++, std::move(fn)});
}

void Simulation::Run(const std::function<void()>& on_tick, std::chrono::milliseconds tick) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(speedup_ > 0 ? now_ / speedup_ : 0));
  Clock::time_point next_tick = Clock::now() + tick;
  while (!events_.empty() && !stopped_) {
    // Take the event out before running it: the handler may schedule events. Moving only
    // the callable leaves time and seq, all the heap compares, intact for pop().
    Event e{events_.top().time, events_.top().seq, std::move(const_cast<Event&>(events_.top()).fn)};
    events_.pop();
    if (speedup_ > 0) {
      const auto due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(e.time / speedup_));
      // Sleep in slices so the progress line keeps moving during long waits.
      for (auto now = Clock::now(); now < due; now = Clock::now()) {
        std::this_thread::sleep_until(std::min(due, now + tick));
        if (on_tick && Clock::now() >= next_tick) {
          on_tick();
          next_tick = Clock::now() + tick;
        }
      }
      max_lag_s_ = std::max(max_lag_s_, std::chrono::duration<double>(Clock::now() - due).count());
    }
    now_ = e.time;
    ++events_run_;
    e.fn();
    if (on_tick && Clock::now() >= next_tick) {
      on_tick();
      next_tick = Clock::now() + tick;
    }
  }
}

}  // namespace kvpool::engine
