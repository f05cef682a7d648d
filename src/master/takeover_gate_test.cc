#include "master/takeover_gate.h"

#include <gtest/gtest.h>

namespace kvpool::master {
namespace {

using Clock = TakeoverGate::Clock;
constexpr auto kFar = std::chrono::hours(1);

TEST(TakeoverGateTest, OpenUntilATermClosesIt) {
  TakeoverGate gate("test");
  EXPECT_TRUE(gate.Open()) << "a lone master, or before any term";
  gate.Close(Clock::now() + kFar);
  EXPECT_TRUE(gate.closed());
  EXPECT_FALSE(gate.Open()) << "closed until the registry is listed";
}

TEST(TakeoverGateTest, OpensOnceEveryRegisteredStoreHasJoinedAndStaysOpen) {
  TakeoverGate gate("test");
  gate.Close(Clock::now() + kFar);
  gate.Joined("a");  // a store may rejoin before the registry is listed
  gate.Expect({"a", "b"});
  EXPECT_FALSE(gate.Open());
  gate.Joined("c");  // a store that was not registered yet counts for nothing missing
  EXPECT_FALSE(gate.Open());
  gate.Joined("b");
  EXPECT_TRUE(gate.Open());
  gate.Expect({"a", "b", "d"});
  EXPECT_TRUE(gate.Open()) << "open for the rest of the term";
}

TEST(TakeoverGateTest, AStoreThatLeftTheRegistryIsNotWaitedFor) {
  TakeoverGate gate("test");
  gate.Close(Clock::now() + kFar);
  gate.Expect({"a", "dead"});
  gate.Joined("a");
  EXPECT_FALSE(gate.Open());
  gate.Expect({"a"});  // its lease ended
  EXPECT_TRUE(gate.Open());
}

TEST(TakeoverGateTest, TheDeadlineOpensItWhateverIsMissing) {
  TakeoverGate gate("test");
  gate.Close(Clock::now() - std::chrono::milliseconds(1));
  EXPECT_TRUE(gate.Open()) << "etcd never listed the registry";
  gate.Close(Clock::now() - std::chrono::milliseconds(1));
  gate.Expect({"a"});
  EXPECT_TRUE(gate.Open());
}

TEST(TakeoverGateTest, ANewTermForgetsTheLastOnesStores) {
  TakeoverGate gate("test");
  gate.Close(Clock::now() + kFar);
  gate.Expect({"a"});
  gate.Joined("a");
  ASSERT_TRUE(gate.Open());
  gate.Close(Clock::now() + kFar);
  gate.Expect({"a"});
  EXPECT_FALSE(gate.Open()) << "a must rejoin this term too";
  gate.Joined("a");
  EXPECT_TRUE(gate.Open());
}

}  // namespace
}  // namespace kvpool::master
