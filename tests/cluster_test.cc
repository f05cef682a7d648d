// The pool across hosts, on a real network: scripts/cluster.sh makes 2 servers (network
// namespaces) joined by 2 rails (bridges), with a master per part and storage services on
// server 1 only. A client on server 0 (pool_load_probe) reaches them over tcp, through its
// rail NICs. One rail's link is cut mid-load and restored: that part's calls fail within
// their deadline, the other part keeps serving, no byte is ever wrong, and the cut part comes
// back without restarting anything. And the four-server deployment's split pools: every server
// its own masters and stores, a replay whose prefill instances save to their own server's
// pool only. The rail cut runs twice: the probe over tcp, and over UCX (its tcp) to stores that
// serve it. Needs root; skips where namespaces cannot be made.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "child_process.h"
#include "transfer/transfer_engine.h"

namespace kvpool::testing {
namespace {

constexpr int kTimeoutMs = 1000;  // the probe's deadline for every call

int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Param: how the probe reaches the stores, "tcp" or "ucx" (the stores serve UCX's tcp too).
class ClusterTest : public ::testing::TestWithParam<const char*> {
 protected:
  bool ucx() const { return std::string(GetParam()) == "ucx"; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to make network namespaces";
    if (ucx() && !transfer::UcxBuilt()) GTEST_SKIP() << "built without UCX";
    name_ = "kvpt" + std::to_string(getpid() % 100000);
    dir_ = std::filesystem::temp_directory_path() / ("kvpool-cluster-test-" + name_);
    env_ = "CLUSTER=" + name_ + " CLUSTER_DIR=" + dir_.string() + " KVPOOL=" KVPOOL_BINARY " SUBNET=10.78 ";
    const std::string store_flags = ucx() ? "STORE_FLAGS='--transport ucx --ucx-tls tcp' " : "";
    const int rc = Shell(env_ + store_flags + "SERVERS=2 RAILS=2 STORE_SERVERS=1 STORE_MEMORY=64MiB " + Script() + " up");
    if (rc == 77) GTEST_SKIP() << "network namespaces cannot be made here";
    ASSERT_EQ(rc, 0) << "cluster.sh up failed; logs in " << dir_;
    up_ = true;
  }

  void TearDown() override {
    if (!up_) return;
    EXPECT_EQ(Shell(env_ + Script() + " down >/dev/null"), 0);
    // Nothing of ours is left behind.
    EXPECT_NE(Shell("ip netns list | grep -q '^" + name_ + "-'"), 0) << "namespaces left after down";
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  static std::string Script() { return std::string(KVPOOL_SOURCE_DIR) + "/scripts/cluster.sh"; }

  void Link(int server, int rail, const char* state) {
    ASSERT_EQ(Shell(env_ + Script() + " link " + std::to_string(server) + " " + std::to_string(rail) + " " + state), 0);
  }

  std::unique_ptr<ChildProcess> StartProbe() {
    std::vector<std::string> args = {"/usr/bin/env", "CLUSTER=" + name_, "CLUSTER_DIR=" + dir_.string(), Script(), "exec",
                                     "0", KVPOOL_PROBE_BINARY, "--pool-file", (dir_ / "pool.conf").string(),
                                     "--timeout-ms", std::to_string(kTimeoutMs)};
    if (ucx()) args.insert(args.end(), {"--ucx-tls", "tcp"});
    return std::make_unique<ChildProcess>(args, (dir_ / "probe.log").string());
  }

  // How a client on server 0 given the probe's transport reaches each segment (kvpool stat).
  std::vector<std::string> SegmentTransports() {
    const std::filesystem::path out = dir_ / "stat.json";
    const std::string flags = ucx() ? " --transport ucx --ucx-tls tcp" : "";
    if (Shell(env_ + Script() + " exec 0 " KVPOOL_BINARY " stat --json --pool-file " + (dir_ / "pool.conf").string() +
              flags + " > " + out.string() + " 2>/dev/null") != 0) {
      return {};
    }
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const auto j = nlohmann::json::parse(text.substr(std::min(text.find('{'), text.size())), nullptr, false);
    std::vector<std::string> transports;
    if (j.is_object()) {
      for (const auto& seg : j["segments"]) transports.push_back(seg["transport"]);
    }
    return transports;
  }

  // The probe's latest counters (the last complete JSON line it printed).
  nlohmann::json Counters() {
    std::ifstream in(dir_ / "probe.log");
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty() && line.front() == '{' && line.back() == '}') last = line;
    }
    return last.empty() ? nlohmann::json() : nlohmann::json::parse(last, nullptr, false);
  }
  uint64_t Count(const nlohmann::json& c, int part, const char* name) {
    return c.is_object() ? c["parts"][part][name].get<uint64_t>() : 0;
  }

  // Polls the probe's counters until `done` holds; false after `limit` (a failure bound, not
  // a measurement: on a healthy box every wait ends within a few seconds).
  bool WaitFor(const std::function<bool(const nlohmann::json&)>& done, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (done(Counters())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string Logs() { return "logs in " + dir_.string() + "; probe: " + Counters().dump(); }

  std::string name_, env_;
  std::filesystem::path dir_;
  bool up_ = false;
};

TEST_P(ClusterTest, ARailCutFailsOnlyItsPartWithinTheDeadlineAndRecovers) {
  EXPECT_EQ(SegmentTransports(), std::vector<std::string>(2, GetParam())) << Logs();
  auto probe = StartProbe();
  ASSERT_TRUE(probe->started());
  // Both parts serve from server 1's stores, over the rails.
  ASSERT_TRUE(WaitFor([&](const auto& c) { return Count(c, 0, "gets_ok") >= 20 && Count(c, 1, "gets_ok") >= 20; }))
      << Logs();

  Link(0, 1, "down");  // server 0's rail-1 NIC: part 1's master and stores are out of its reach
  const auto cut = Counters();
  ASSERT_TRUE(WaitFor([&](const auto& c) {
    return Count(c, 1, "unreachable") >= 3 && Count(c, 0, "gets_ok") >= Count(cut, 0, "gets_ok") + 20;
  })) << Logs();

  Link(0, 1, "up");
  const auto restored = Counters();
  ASSERT_TRUE(WaitFor([&](const auto& c) { return Count(c, 1, "gets_ok") >= Count(restored, 1, "gets_ok") + 20; }))
      << "part 1 did not recover; " << Logs();

  ASSERT_EQ(WEXITSTATUS(probe->Kill(SIGTERM)), 0) << Logs();
  const auto final_counters = Counters();
  EXPECT_EQ(Count(final_counters, 0, "unreachable"), 0u) << "the cut reached part 0; " << Logs();
  for (int part = 0; part < 2; ++part) {
    EXPECT_EQ(Count(final_counters, part, "wrong"), 0u) << "part " << part << ": wrong bytes served";
    // Each call is a master round trip and a transfer, each with the deadline; a hung call
    // would be far past this.
    EXPECT_LE(Count(final_counters, part, "max_call_ms"), 4u * kTimeoutMs + 2000) << "part " << part << ": " << Logs();
  }
  // After the cut a fresh client reaches every store the same way again (over UCX: the
  // stores' UCX outlived the cut).
  EXPECT_EQ(SegmentTransports(), std::vector<std::string>(2, GetParam())) << Logs();
}

INSTANTIATE_TEST_SUITE_P(Transports, ClusterTest, ::testing::Values("tcp", "ucx"),
                         [](const auto& info) { return std::string(info.param); });

// POOLS=split: 4 servers, each with its own 4-part pool. A four-server replay on server 0 with
// --server-pool-files: every server's prefill instances save to their own pool, so each pool
// ends up holding objects, and every restored or handed-off byte verifies.
TEST(SplitPoolClusterTest, EveryServersPrefillUsesItsOwnPool) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make network namespaces";
  const std::string name = "kvps" + std::to_string(getpid() % 100000);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvpool-cluster-test-" + name);
  const std::string script = std::string(KVPOOL_SOURCE_DIR) + "/scripts/cluster.sh";
  const std::string env = "CLUSTER=" + name + " CLUSTER_DIR=" + dir.string() + " KVPOOL=" KVPOOL_BINARY " SUBNET=10.79 ";
  const int rc = Shell(env + "POOLS=split SERVERS=4 RAILS=4 STORE_MEMORY=16MiB " + script + " up >/dev/null");
  if (rc == 77) GTEST_SKIP() << "network namespaces cannot be made here";
  ASSERT_EQ(rc, 0) << "cluster.sh up failed; logs in " << dir;
  std::string files;
  for (int s = 0; s < 4; ++s) files += (s ? "," : "") + (dir / ("pool-s" + std::to_string(s) + ".conf")).string();
  const std::string exec = env + script + " exec 0 " KVPOOL_BINARY " ";
  const int replay = Shell(exec + "--log-level warn replay --synth 12 --synth-turn-scale 0.3 --geometry tiny "
                           "--topology 4x8-6p2d --sessions 6 --requests 30 --duration 0 --mode pool --pool-scope split "
                           "--server-pool-files " + files + " --json " + (dir / "replay.json").string() + " >/dev/null");
  EXPECT_EQ(replay, 0) << "replay failed (3: wrong bytes or failed requests); logs in " << dir;
  for (int s = 0; s < 4; ++s) {
    const std::filesystem::path stat = dir / ("stat-s" + std::to_string(s) + ".json");
    ASSERT_EQ(Shell(exec + "stat --json --pool-file " + (dir / ("pool-s" + std::to_string(s) + ".conf")).string() +
                    " > " + stat.string()), 0);
    std::ifstream in(stat);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_GT(j.value("objects", 0), 0) << "server " << s << "'s pool holds nothing: " << j.dump();
  }
  EXPECT_EQ(Shell(env + script + " down >/dev/null"), 0);
  EXPECT_NE(Shell("ip netns list | grep -q '^" + name + "-'"), 0) << "namespaces left after down";
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvpool::testing
