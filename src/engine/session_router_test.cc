#include "engine/session_router.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvpool::engine {
namespace {

const std::vector<int> kFour = {0, 1, 2, 3};

TEST(SessionRouterTest, ASessionSticksToItsInstance) {
  SessionRouter router(7, true);
  std::vector<double> loads = {0, 0, 0, 0};
  const int first = router.Route(42, kFour, loads);
  loads[first] = 1e9;  // even when it becomes the busiest
  EXPECT_EQ(router.Route(42, kFour, loads), first);
  EXPECT_EQ(router.sessions(), 1u);
  EXPECT_EQ(router.moves(), 0u);
}

TEST(SessionRouterTest, NewSessionsGoToTheLessLoadedOfTwo) {
  SessionRouter router(1, true);
  const std::vector<double> loads = {5, 1};
  const std::vector<int> two = {0, 1};
  for (uint64_t s = 0; s < 20; ++s) EXPECT_EQ(router.Route(s, two, loads), 1);
}

TEST(SessionRouterTest, NeverPicksTheMostLoadedOfMany) {
  SessionRouter router(3, true);
  const std::vector<double> loads = {1, 2, 3, 100};
  int counts[4] = {0, 0, 0, 0};
  for (uint64_t s = 0; s < 400; ++s) ++counts[router.Route(s, kFour, loads)];
  EXPECT_EQ(counts[3], 0);  // it loses every comparison it is drawn into
  EXPECT_GT(counts[0], counts[2]);
}

TEST(SessionRouterTest, OnlyTheGivenCandidatesAreUsed) {
  SessionRouter router(5, true);
  const std::vector<double> loads = {0, 0, 50, 60, 70, 0};
  const std::vector<int> group = {2, 3, 4};
  for (uint64_t s = 0; s < 50; ++s) {
    const int pick = router.Route(s, group, loads);
    EXPECT_TRUE(pick >= 2 && pick <= 4) << pick;
    EXPECT_NE(pick, 4);
  }
  // A session whose instance is not a candidate any more is placed again.
  const std::vector<int> other = {0, 1};
  EXPECT_LE(router.Route(0, other, loads), 1);
}

TEST(SessionRouterTest, WithoutAffinityEveryRequestGoesToTheLessLoadedOfTwo) {
  SessionRouter router(9, /*session_affinity=*/false);
  const std::vector<int> two = {0, 1};
  ASSERT_EQ(router.Route(1, two, std::vector<double>{0, 10}), 0);
  EXPECT_EQ(router.Route(1, two, std::vector<double>{10, 0}), 1);  // the session follows the load
  EXPECT_EQ(router.moves(), 1u);
  EXPECT_EQ(router.Route(1, two, std::vector<double>{10, 0}), 1);
  EXPECT_EQ(router.moves(), 1u);
  // Equal loads: either, by the seeded draw; over many sessions both are used.
  int counts[2] = {0, 0};
  for (uint64_t s = 10; s < 110; ++s) ++counts[router.Route(s, two, std::vector<double>{0, 0})];
  EXPECT_GT(counts[0], 20);
  EXPECT_GT(counts[1], 20);
}

TEST(SessionRouterTest, OneInstanceTakesEverything) {
  SessionRouter router(3, true);
  const std::vector<double> loads = {10};
  const std::vector<int> one = {0};
  EXPECT_EQ(router.Route(1, one, loads), 0);
}

}  // namespace
}  // namespace kvpool::engine
