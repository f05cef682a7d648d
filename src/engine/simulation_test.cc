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

TEST(SimulationTest, SpeedupPacesEmulatedTimeAgainstTheWallClock) {
  Simulation sim(100);  // 10 emulated seconds -> ~0.1 s of wall time
  sim.At(10, [] {});
  const auto start = std::chrono::steady_clock::now();
  sim.Run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(wall, 0.09);
  EXPECT_LT(wall, 1.0);
  Simulation fast;  // unpaced
  fast.At(1e6, [] {});
  const auto s2 = std::chrono::steady_clock::now();
  fast.Run();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - s2).count(), 0.5);
}

}  // namespace
}  // namespace kvpool::engine
