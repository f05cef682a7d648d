#include "common/clock.h"

#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>

namespace kvpool {
namespace {

using namespace std::chrono_literals;

// Counts the runs of a timer's task and lets a test wait for the n-th.
struct Runs {
  std::mutex mu;
  std::condition_variable changed;
  int count = 0;
  void Add() {
    std::lock_guard lock(mu);
    ++count;
    changed.notify_all();
  }
  // A hang guard, not a timing check: an hour would do as well.
  bool WaitFor(int n) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, 60s, [&] { return count >= n; });
  }
};

TEST(ClockTest, TheDefaultTimerRunsItsTaskEveryPeriodUntilDestroyed) {
  Runs runs;
  auto timer = SteadyClock::Get()->Every(1ms, [&] { runs.Add(); });
  ASSERT_TRUE(runs.WaitFor(3));
  timer.reset();  // waits for a run in progress: none runs after this
  std::lock_guard lock(runs.mu);
  const int stopped_at = runs.count;
  EXPECT_GE(stopped_at, 3);
}

TEST(ClockTest, RunSoonRunsTheTaskOutOfTurn) {
  Runs runs;
  ManualClock clock;  // a manual clock's timers run on real time: an hour's period never comes
  auto timer = clock.Every(std::chrono::hours(1), [&] { runs.Add(); });
  timer->RunSoon();
  EXPECT_TRUE(runs.WaitFor(1));
  timer->RunSoon();
  EXPECT_TRUE(runs.WaitFor(2));
}

}  // namespace
}  // namespace kvpool
