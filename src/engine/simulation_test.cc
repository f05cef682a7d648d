#include "engine/simulation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace kvpool::engine {
namespace {

TEST(SimulationTest, RunsEventsInTimeOrderTiesInSchedulingOrder) {
  Simulation sim;
  std::vector<int> order;
  sim.At(2, [&] { order.push_back(3); });
  sim.At(1, [&] { order.push_back(1); });
  sim.At(1, [&] {
    order.push_back(2);
    sim.After(0.5, [&] { order.push_back(25); });  // at 1.5
  });
  sim.Run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 25, 3}));
  EXPECT_DOUBLE_EQ(sim.now(), 2);
}

TEST(SimulationTest, StopLeavesLaterEventsUnrun) {
  Simulation sim;
  int ran = 0;
  sim.At(1, [&] { sim.Stop(); });
  sim.At(2, [&] { ++ran; });
  sim.Run();
  EXPECT_EQ(ran, 0);
}

// Only lower bounds on the wall clock: pacing may run late on a loaded machine, never early.
TEST(SimulationTest, SpeedupNeverRunsAnEventBeforeItsPacedTime) {
  Simulation sim(100);  // emulated second t runs no sooner than t / 100 s of wall time
  std::vector<double> ran_after_s;
  const auto start = std::chrono::steady_clock::now();
  for (double t : {2.0, 5.0, 10.0}) {
    sim.At(t, [&] { ran_after_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()); });
  }
  sim.Run();
  ASSERT_EQ(ran_after_s.size(), 3u);
  EXPECT_GE(ran_after_s[0], 0.02);
  EXPECT_GE(ran_after_s[1], 0.05);
  EXPECT_GE(ran_after_s[2], 0.10);
  EXPECT_GE(sim.max_lag_s(), 0);
  // Unpaced, an event a million emulated seconds away runs at once: were it paced, the test
  // would run into ctest's timeout.
  Simulation fast;
  bool ran = false;
  fast.At(1e6, [&] { ran = true; });
  fast.Run();
  EXPECT_TRUE(ran);
  EXPECT_EQ(fast.now(), 1e6);
}

TEST(SimulationTest, TheClocksTimersRunInEmulatedTimeAndDoNotKeepTheLoopGoing) {
  Simulation sim;
  std::vector<int64_t> ticks_ms;  // the clock's time at each run of the timer
  auto timer = sim.clock()->Every(std::chrono::milliseconds(100), [&] { ticks_ms.push_back(sim.clock()->NowMs()); });
  bool stopped_timer = false;
  sim.At(0.35, [&] {});
  sim.At(0.55, [&] {
    timer.reset();  // a queued run finds it gone
    stopped_timer = true;
  });
  sim.At(1.0, [&] {});
  sim.Run();
  EXPECT_TRUE(stopped_timer);
  // At 0.1 to 0.5 emulated seconds, on a clock that starts at one second; none after the reset.
  EXPECT_EQ(ticks_ms, (std::vector<int64_t>{1100, 1200, 1300, 1400, 1500}));
  EXPECT_EQ(sim.now(), 1.0);  // the last foreground event; no timer left would have run on

  Simulation idle;
  int runs = 0;
  auto forever = idle.clock()->Every(std::chrono::milliseconds(10), [&] { ++runs; });
  idle.At(0.105, [] {});
  idle.Run();  // returns: only the timer's events are left
  EXPECT_EQ(runs, 10);
}

}  // namespace
}  // namespace kvpool::engine
