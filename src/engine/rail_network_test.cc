#include "engine/rail_network.h"

#include <gtest/gtest.h>

namespace kvpool::engine {
namespace {

TEST(RailNetworkTest, WithinAServerIsFreeAndUncounted) {
  RailNetwork net(2, 8, 1e9);
  EXPECT_EQ(net.Transfer(0, 1, 0, 3, 5e9, 10.0), 10.0);
  EXPECT_EQ(net.counters().transfers, 0u);
}

TEST(RailNetworkTest, OneTransferTakesItsBytesOverTheBandwidth) {
  RailNetwork net(2, 8, 1e9);
  EXPECT_DOUBLE_EQ(net.Transfer(0, 2, 1, 2, 2e9, 1.0), 3.0);
  EXPECT_EQ(net.counters().transfers, 1u);
  EXPECT_DOUBLE_EQ(net.counters().bytes, 2e9);
  EXPECT_DOUBLE_EQ(net.counters().queued_s, 0.0);
}

TEST(RailNetworkTest, TransfersSharingANicQueueAndOthersDoNot) {
  RailNetwork net(3, 8, 1e9);
  EXPECT_DOUBLE_EQ(net.Transfer(0, 0, 1, 0, 1e9, 0.0), 1.0);
  // The same sending NIC, another receiver: starts when the first is through.
  EXPECT_DOUBLE_EQ(net.Transfer(0, 0, 2, 0, 1e9, 0.5), 2.0);
  // The first one's receiving NIC, another sender: the same.
  EXPECT_DOUBLE_EQ(net.Transfer(2, 1, 1, 0, 1e9, 0.5), 2.0);
  // Other NICs of the same servers are untouched.
  EXPECT_DOUBLE_EQ(net.Transfer(0, 1, 1, 1, 1e9, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(net.counters().queued_s, 0.5 + 0.5);
}

TEST(RailNetworkTest, NoBandwidthMeansNoTime) {
  RailNetwork net(2, 8, 0);
  EXPECT_EQ(net.Transfer(0, 0, 1, 0, 1e12, 4.0), 4.0);
  EXPECT_EQ(net.counters().transfers, 1u);
}

}  // namespace
}  // namespace kvpool::engine
