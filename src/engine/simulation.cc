#include "engine/simulation.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>

namespace kvpool::engine {

void Simulation::Schedule(double time, std::function<void()> fn, bool background) {
  if (!background) ++foreground_pending_;
  events_.push(Event{std::max(time, now()), next_seq_++, background, std::move(fn)});
}

void Simulation::Run(const std::function<void()>& on_tick, std::chrono::milliseconds tick) {
  using WallClock = std::chrono::steady_clock;
  const WallClock::time_point start = WallClock::now() - std::chrono::duration_cast<WallClock::duration>(
                                                     std::chrono::duration<double>(speedup_ > 0 ? now() / speedup_ : 0));
  WallClock::time_point next_tick = WallClock::now() + tick;
  while (foreground_pending_ > 0 && !stopped_) {
    // Take the event out before running it: the handler may schedule events. Moving only
    // the callable leaves time and seq, all the heap compares, intact for pop().
    Event e{events_.top().time, events_.top().seq, events_.top().background,
            std::move(const_cast<Event&>(events_.top()).fn)};
    events_.pop();
    if (!e.background) --foreground_pending_;
    if (speedup_ > 0) {
      const auto due = start + std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(e.time / speedup_));
      // Sleep in slices so the progress line keeps moving during long waits.
      for (auto now = WallClock::now(); now < due; now = WallClock::now()) {
        std::this_thread::sleep_until(std::min(due, now + tick));
        if (on_tick && WallClock::now() >= next_tick) {
          on_tick();
          next_tick = WallClock::now() + tick;
        }
      }
      max_lag_s_ = std::max(max_lag_s_, std::chrono::duration<double>(WallClock::now() - due).count());
    }
    now_.store(e.time, std::memory_order_relaxed);
    ++events_run_;
    e.fn();
    if (on_tick && WallClock::now() >= next_tick) {
      on_tick();
      next_tick = WallClock::now() + tick;
    }
  }
}

namespace {

// A SimulationClock's timer: each run schedules the next, as background events; the shared
// state tells events still queued that the timer is gone.
class SimulationTimer final : public Timer {
 public:
  SimulationTimer(Simulation* sim, std::chrono::nanoseconds period, std::function<void()> task)
      : sim_(sim), state_(std::make_shared<State>(State{std::chrono::duration<double>(period).count(), std::move(task)})) {
    ScheduleNext(sim_, state_);
  }
  ~SimulationTimer() override { state_->stopped = true; }
  void RunSoon() override {
    sim_->AtBackground(sim_->now(), [state = state_] {
      if (!state->stopped) state->task();
    });
  }

 private:
  struct State {
    double period_s;
    std::function<void()> task;
    bool stopped = false;  // the loop's thread only (see SimulationClock)
  };
  static void ScheduleNext(Simulation* sim, std::shared_ptr<State> state) {
    const double at = sim->now() + state->period_s;
    sim->AtBackground(at, [sim, state = std::move(state)]() mutable {
      if (state->stopped) return;
      state->task();
      ScheduleNext(sim, std::move(state));
    });
  }

  Simulation* const sim_;
  const std::shared_ptr<State> state_;
};

}  // namespace

int64_t SimulationClock::NowNs() const { return 1'000'000'000 + std::llround(sim_->now() * 1e9); }

std::unique_ptr<Timer> SimulationClock::Every(std::chrono::nanoseconds period, std::function<void()> task) {
  return std::make_unique<SimulationTimer>(sim_, period, std::move(task));
}

}  // namespace kvpool::engine
