#include "engine/session_router.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvpool::engine {
namespace {

TEST(SessionRouterTest, ASessionSticksToItsInstance) {
  SessionRouter router(4, 7);
  std::vector<double> loads = {0, 0, 0, 0};
  const int first = router.Route(42, loads);
  loads[first] = 1e9;  // even when it becomes the busiest
  EXPECT_EQ(router.Route(42, loads), first);
  router.EndSession(42);
  EXPECT_EQ(router.sessions(), 0u);
}

TEST(SessionRouterTest, NewSessionsGoToTheLessLoadedOfTwo) {
  SessionRouter router(2, 1);
  const std::vector<double> loads = {5, 1};
  for (uint64_t s = 0; s < 20; ++s) EXPECT_EQ(router.Route(s, loads), 1);
}

TEST(SessionRouterTest, NeverPicksTheMostLoadedOfMany) {
  SessionRouter router(4, 3);
  const std::vector<double> loads = {1, 2, 3, 100};
  int counts[4] = {0, 0, 0, 0};
  for (uint64_t s = 0; s < 400; ++s) ++counts[router.Route(s, loads)];
  EXPECT_EQ(counts[3], 0);  // it loses every comparison it is drawn into
  EXPECT_GT(counts[0], counts[2]);
}

TEST(SessionRouterTest, OneInstanceTakesEverything) {
  SessionRouter router(1, 3);
  const std::vector<double> loads = {10};
  EXPECT_EQ(router.Route(1, loads), 0);
}

}  // namespace
}  // namespace kvpool::engine
