#include "engine/topology.h"

#include <gtest/gtest.h>

#include <set>

namespace kvpool::engine {
namespace {

ModelGeometry Scaled() { return GeometryPreset("scaled").value(); }

TEST(TopologyTest, FourServerClusterIsSixPrefillTwoDecodeInTwoGroups) {
  const Topology t = Topology::FourServer6P2D();
  ASSERT_TRUE(t.Validate(Scaled()).ok());
  EXPECT_EQ(t.servers, 4);
  EXPECT_EQ(t.groups(), 2);
  EXPECT_EQ(t.prefill.size(), 6u);
  EXPECT_EQ(t.decode.size(), 2u);
  EXPECT_EQ(t.total_gpus(Scaled()), 32);
  for (int g = 0; g < 2; ++g) {
    std::set<int> servers;
    for (const EngineSlot& p : t.prefill) {
      if (p.group != g) continue;
      EXPECT_NE(p.server, t.decode[g].server) << "a prefill instance on its own group's decode server";
      servers.insert(p.server);
    }
    EXPECT_EQ(servers.size(), 3u);  // its three prefill instances on three servers
  }
  // 768 GiB per server, at 48,672 B per token: ~16.9M tokens.
  EXPECT_NEAR(static_cast<double>(t.pool_tokens_per_server(Scaled())), 768.0 * (1ull << 30) / 48672, 0.1e6);
}

TEST(TopologyTest, UniformIsOnePrefillAndOneDecodePerServerInOneGroup) {
  const Topology t = Topology::Uniform(3);
  ASSERT_TRUE(t.Validate(Scaled()).ok());
  EXPECT_EQ(t.groups(), 1);
  EXPECT_EQ(t.total_gpus(Scaled()), 24);
  EXPECT_EQ(t.pool_tokens_per_server(Scaled()) * 3, Scaled().pool_tokens / 3 * 3);
}

TEST(TopologyTest, PresetsByName) {
  EXPECT_EQ(TopologyPreset("1x8").value().servers, 1);
  EXPECT_EQ(TopologyPreset("5x8").value().servers, 5);
  EXPECT_EQ(TopologyPreset("4x8-6p2d").value().prefill.size(), 6u);
  for (const char* bad : {"", "x8", "0x8", "65x8", "4x8-6p2", "2x4", "-1x8"}) {
    const auto t = TopologyPreset(bad);
    EXPECT_FALSE(t.ok()) << bad;
  }
  EXPECT_NE(TopologyPreset("2x4").status().message().find("4x8-6p2d"), std::string::npos);
}

TEST(TopologyTest, RefusesEnginesSharingAGpuOrOffTheServer) {
  Topology t = Topology::FourServer6P2D();
  t.prefill[0].first_gpu = 0;  // server 1's decode is there
  EXPECT_NE(t.Validate(Scaled()).message().find("taken"), std::string::npos);
  t = Topology::FourServer6P2D();
  t.prefill[0].first_gpu = 6;
  EXPECT_NE(t.Validate(Scaled()).message().find("does not exist"), std::string::npos);
  t = Topology::FourServer6P2D();
  t.prefill[0].server = 4;
  EXPECT_FALSE(t.Validate(Scaled()).ok());
  t = Topology::FourServer6P2D();
  t.decode.pop_back();  // group 1 has prefill instances and nothing to decode
  EXPECT_NE(t.Validate(Scaled()).message().find("group 1"), std::string::npos);
}

}  // namespace
}  // namespace kvpool::engine
