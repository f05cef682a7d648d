// The `kvpool` binary as a user meets it: real processes, real files, exit codes and messages.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <thread>

#include "pool_cluster.h"
#include "transfer/transfer_engine.h"

namespace kvpool::testing {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout, then stderr
  std::string stdout_text;
};

// Runs `kvpool ARGS...` to completion and returns its exit code and output. The 120 s limit
// only guards against a hang: a replay under ASan on a loaded 2-core machine takes 30 s.
CliRun Kvpool(std::vector<std::string> args) {
  args.insert(args.begin(), KVPOOL_BINARY);
  const auto log = std::filesystem::temp_directory_path() / ("kvpool-cli-" + std::to_string(getpid()));
  ChildProcess p(args, log.string() + ".out", log.string() + ".err");
  const int status = p.Wait(std::chrono::seconds(120));
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, "", p.Log()};
  r.output = r.stdout_text + p.ErrorLog();
  std::filesystem::remove(log.string() + ".out");
  std::filesystem::remove(log.string() + ".err");
  return r;
}

// What `kvpool stat --json` printed on stdout, or null when it failed. Its logs (a transport
// falling back to tcp while a store is still mounting, say) go to stderr, never into the JSON.
nlohmann::json StatJson(const CliRun& r) {
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.stdout_text);
}

size_t SegmentCount(const CliRun& r) {
  const nlohmann::json j = StatJson(r);
  return j.is_object() && j.contains("segments") ? j["segments"].size() : 0;
}

TEST(Cli, RejectsBadArgumentsWithTheReason) {
  CliRun r = Kvpool({"store", "--master", "127.0.0.1:1", "--memory", "12XB"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown unit"), std::string::npos) << r.output;

  r = Kvpool({"store", "--master", "no-port-here"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("HOST:PORT"), std::string::npos) << r.output;

  r = Kvpool({"frobnicate"});
  EXPECT_NE(r.exit_code, 0);

  r = Kvpool({"master", "--high-watermark", "7"});
  EXPECT_NE(r.exit_code, 0);

  // An SSD tier size is the embedded pool's: an existing pool's stores bring their own.
  r = Kvpool({"replay", "--synth", "4", "--master", "127.0.0.1:1", "--ssd-tokens", "1000000"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("kvpool store --ssd"), std::string::npos) << r.output;
  // So is the bound on retention hints: an existing pool's masters have their own.
  r = Kvpool({"replay", "--synth", "4", "--master", "127.0.0.1:1", "--max-retained-fraction", "0.9"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("kvpool master --max-retained-fraction"), std::string::npos) << r.output;
  r = Kvpool({"master", "--max-retained-fraction", "1.5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--max-retained-fraction"), std::string::npos) << r.output;
  r = Kvpool({"replay", "--synth", "4", "--ssd-dir", "/no/such/folder"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/no/such/folder"), std::string::npos) << r.output;
  // A prefill cost is three positive numbers.
  r = Kvpool({"replay", "--synth", "4", "--prefill-cost", "0.015,12e-6"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("OVERHEAD_S,S_PER_TOKEN,S_PER_PAIR"), std::string::npos) << r.output;
  r = Kvpool({"replay", "--synth", "4", "--prefill-cost", "0.015,-1,1e-10"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'-1' is not a positive number"), std::string::npos) << r.output;
  // What the gate reserves, and supersession, are named choices.
  r = Kvpool({"replay", "--synth", "4", "--gate-reserve", "recorded"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gate-reserve"), std::string::npos) << r.output;
  r = Kvpool({"replay", "--synth", "4", "--supersede", "yes"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--supersede"), std::string::npos) << r.output;
}

TEST(Cli, UnreachableMasterIsAClearErrorNotAHang) {
  const std::string nobody = "127.0.0.1:" + std::to_string(PickFreePort());
  CliRun r = Kvpool({"get", "some/key", "-", "--master", nobody, "--timeout-ms", "300"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("cannot reach the kvpool master"), std::string::npos) << r.output;

  r = Kvpool({"store", "--master", nobody, "--memory", "8MiB", "--no-huge-pages", "--shm-dir", "/tmp"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(nobody), std::string::npos) << r.output;
}

TEST(Cli, MasterOnABusyPortSaysSo) {
  PoolCluster cluster({.stores = 0});
  ASSERT_TRUE(cluster.ConnectWhenReady(0));
  CliRun r = Kvpool({"master", "--listen", cluster.master_address(), "--metrics-listen", ""});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(cluster.master_address()), std::string::npos) << r.output;
}

TEST(Cli, PutGetStatThroughFiles) {
  PoolCluster cluster({.stores = 1});
  ASSERT_TRUE(cluster.ConnectWhenReady(1)) << cluster.Logs();
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in = dir / ("kvpool-cli-in-" + std::to_string(getpid()));
  const std::string out = dir / ("kvpool-cli-out-" + std::to_string(getpid()));
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  std::ofstream(in, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));

  const std::string master = cluster.master_address();
  CliRun r = Kvpool({"put", "files/a", in, "--master", master, "--group", "g1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"get", "files/a", out, "--master", master});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream back(out, std::ios::binary);
  std::string read_back((std::istreambuf_iterator<char>(back)), {});
  EXPECT_EQ(read_back, data);

  r = Kvpool({"exists", "files/a", "--master", master});
  EXPECT_EQ(r.exit_code, 0);
  r = Kvpool({"get", "files/missing", out, "--master", master});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("NOT_FOUND"), std::string::npos) << r.output;
  r = Kvpool({"put", "files/b", "/nonexistent/file", "--master", master});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/file"), std::string::npos) << r.output;

  r = Kvpool({"stat", "--json", "--master", master});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = StatJson(r);
  EXPECT_EQ(j["objects"], 1);
  EXPECT_EQ(j["segments"].size(), 1u);

  r = Kvpool({"rm", "files/a", "--master", master});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"exists", "files/a", "--master", master});
  EXPECT_EQ(r.exit_code, 1);
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// --transport ucx (UCX's tcp on loopback): a store that serves UCX is read and written one-sided
// by clients on other hosts that ask for it (stat says so), over tcp by the rest; asking for
// UCX's settings without UCX is refused with the reason.
TEST(Cli, AStoreServingUcxIsReachedOverItByClientsThatAsk) {
  const std::vector<std::string> ucx = {"--transport", "ucx", "--ucx-tls", "tcp", "--ucx-devices", "lo"};
  CliRun r = Kvpool({"stat", "--master", "127.0.0.1:1", "--ucx-tls", "tcp"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("need --transport ucx"), std::string::npos) << r.output;
  if (!transfer::UcxBuilt()) GTEST_SKIP() << "built without UCX";
  PoolCluster cluster({.stores = 1, .store_flags = ucx});
  ASSERT_TRUE(cluster.ConnectWhenReady(1)) << cluster.Logs();
  ::setenv("KVPOOL_HOST_ID", "another-host", 1);  // the CLI's clients: another host than the store's
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in = dir / ("kvpool-cli-ucx-in-" + std::to_string(getpid()));
  const std::string out = dir / ("kvpool-cli-ucx-out-" + std::to_string(getpid()));
  std::string data(5 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 11);
  std::ofstream(in, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  auto with = [&](std::vector<std::string> args, bool over_ucx) {
    args.insert(args.end(), {"--master", cluster.master_address()});
    if (over_ucx) args.insert(args.end(), ucx.begin(), ucx.end());
    return Kvpool(args);
  };
  auto expect_value = [&](const std::string& key, bool over_ucx) {
    CliRun got = with({"get", key, out}, over_ucx);
    ASSERT_EQ(got.exit_code, 0) << got.output;
    std::ifstream back(out, std::ios::binary);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(back)), {}), data) << key;
  };
  r = with({"put", "written-over-ucx", in}, true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = with({"put", "written-over-tcp", in}, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (bool over_ucx : {true, false}) {
    SCOPED_TRACE(over_ucx ? "ucx" : "tcp");
    expect_value("written-over-ucx", over_ucx);
    expect_value("written-over-tcp", over_ucx);
    r = with({"stat", "--json"}, over_ucx);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto j = StatJson(r);
    EXPECT_EQ(j["segments"][0]["transport"], over_ucx ? "ucx" : "tcp") << r.output;
  }
  ::unsetenv("KVPOOL_HOST_ID");
  EXPECT_NE(cluster.Logs().find("serving UCX"), std::string::npos) << cluster.Logs();
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// A pool started with --auth-file serves only processes given the same file: a client or a
// store without it is refused with a message that says what to give it; a secret file others
// may read is refused before anything starts.
TEST(Cli, APoolWithAnAuthFileServesOnlyProcessesGivenIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-auth-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string secret = dir / "pool.secret", open_secret = dir / "open.secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::ofstream(open_secret) << "0123456789abcdef0123456789abcdef\n";
  std::filesystem::permissions(open_secret, std::filesystem::perms::owner_read | std::filesystem::perms::group_read |
                                                std::filesystem::perms::others_read);

  PoolCluster cluster({.stores = 1, .auth_file = secret});
  ASSERT_TRUE(cluster.ConnectWhenReady(1)) << cluster.Logs();
  const std::string master = cluster.master_address(), in = dir / "in", out = dir / "out";
  std::ofstream(in, std::ios::binary) << std::string(1 << 20, 'x');

  CliRun r = Kvpool({"put", "k", in, "--master", master});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--auth-file"), std::string::npos) << r.output;
  r = Kvpool({"put", "k", in, "--master", master, "--auth-file", secret});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"get", "k", out, "--master", master, "--auth-file", secret});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream back(out, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(back)), {}), std::string(1 << 20, 'x'));

  r = Kvpool({"get", "k", out, "--master", master, "--auth-file", open_secret});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("chmod 600"), std::string::npos) << r.output;
  r = Kvpool({"store", "--master", master, "--memory", "8MiB", "--no-huge-pages", "--listen", "127.0.0.1:0",
              "--shm-dir", dir.string()});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--auth-file"), std::string::npos) << r.output;

  // A tenant's credential, issued from the pool's secret: its namespace only, and no store.
  const std::string credential = dir / "team-a.cred";
  r = Kvpool({"credential", "issue", "--auth-file", secret, "--tenant", "team-a", "--namespace", "a", "--out",
              credential});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"put", "a/k", in, "--master", master, "--auth-file", credential});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"get", "a/k", out, "--master", master, "--auth-file", credential});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream tenant_back(out, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(tenant_back)), {}), std::string(1 << 20, 'x'));
  r = Kvpool({"get", "k", out, "--master", master, "--auth-file", credential});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PERMISSION_DENIED"), std::string::npos) << r.output;
  r = Kvpool({"store", "--master", master, "--memory", "8MiB", "--no-huge-pages", "--listen", "127.0.0.1:0",
              "--shm-dir", dir.string(), "--auth-file", credential});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pool's own secret"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// A pool of two parts, as an operator builds it from the shell: a master per part, stores
// joining by --pool-file and --part, clients naming the pool once.
TEST(Cli, APoolOfTwoPartsFromOnePoolFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-parts-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string a = "127.0.0.1:" + std::to_string(PickFreePort()), b = "127.0.0.1:" + std::to_string(PickFreePort());
  ChildProcess m0({KVPOOL_BINARY, "master", "--part", "0", "--listen", a, "--metrics-listen", ""}, dir / "m0.log");
  ChildProcess m1({KVPOOL_BINARY, "master", "--part", "1", "--listen", b, "--metrics-listen", ""}, dir / "m1.log");
  const std::string pool_file = dir / "pool.conf";
  std::ofstream(pool_file) << "# two parts\npart0 = " << a << "\npart1 = " << b << "\n";
  const auto store = [&](const char* part, const std::string& log) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{KVPOOL_BINARY, "store", "--pool-file", pool_file, "--part", part, "--memory", "8MiB",
                                 "--no-huge-pages", "--listen", "127.0.0.1:0", "--shm-dir", dir.string()},
        dir / log);
  };
  auto s0 = store("0", "s0.log"), s1 = store("1", "s1.log");
  CliRun r;
  for (int attempt = 0; attempt < 200; ++attempt) {  // until both stores are mounted
    r = Kvpool({"stat", "--json", "--pool-file", pool_file, "--timeout-ms", "1000"});
    if (SegmentCount(r) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(SegmentCount(r), 2u) << r.output;
  auto j = StatJson(r);
  ASSERT_EQ(j["parts"].size(), 2u);
  EXPECT_EQ(j["segments"][0]["part"], 0);
  EXPECT_EQ(j["segments"][1]["part"], 1);

  // A stage object goes to its stage's part, whichever way the pool is named.
  const std::string value = dir / "value";
  std::ofstream(value) << "stage one's bytes";
  r = Kvpool({"put", "ns/chunk/s1", value, "--pool", "part0=" + a + ",part1=" + b});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = Kvpool({"get", "ns/chunk/s1", "-", "--pool-file", pool_file});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stage one's bytes"), std::string::npos);
  r = Kvpool({"stat", "--json", "--pool-file", pool_file});
  j = StatJson(r);
  EXPECT_EQ(j["parts"][0]["objects"], 0);
  EXPECT_EQ(j["parts"][1]["objects"], 1);

  // Bad pools: clear errors, nothing joins or changes.
  r = Kvpool({"store", "--pool-file", pool_file, "--part", "5", "--memory", "8MiB", "--no-huge-pages"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("part 5 is not in the pool (it has parts 0 to 1)"), std::string::npos) << r.output;
  r = Kvpool({"store", "--master", a, "--part", "1", "--memory", "8MiB", "--no-huge-pages", "--shm-dir", dir.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("joins part 1, but this master serves part 0"), std::string::npos) << r.output;
  r = Kvpool({"stat", "--pool", "part0=" + b + ",part1=" + a});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("listed as part 0 but its master serves part 1"), std::string::npos) << r.output;
  r = Kvpool({"stat", "--pool", "part0=" + a + ",part0=" + b});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("part0 is listed twice"), std::string::npos) << r.output;
  r = Kvpool({"stat", "--pool", "part0=" + a, "--master", a});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;

  // A store's --stage-parts would route nothing (a store joins one part): refused, not ignored.
  r = Kvpool({"store", "--pool-file", pool_file, "--part", "1", "--stage-parts", "1,0", "--memory", "8MiB"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--stage-parts"), std::string::npos) << r.output;
  // KVPOOL_MASTER names one part's master, as --master does: --part 1 joins that master.
  ::setenv("KVPOOL_MASTER", b.c_str(), 1);
  ChildProcess from_env({KVPOOL_BINARY, "store", "--part", "1", "--memory", "8MiB", "--no-huge-pages", "--listen",
                         "127.0.0.1:0", "--shm-dir", dir.string()},
                        dir / "s2.log");
  ::unsetenv("KVPOOL_MASTER");
  for (int attempt = 0; attempt < 200; ++attempt) {  // until the third store is mounted
    r = Kvpool({"stat", "--json", "--pool-file", pool_file, "--timeout-ms", "1000"});
    if (SegmentCount(r) == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(SegmentCount(r), 3u) << r.output << from_env.Log();
  j = StatJson(r);
  int on_part_1 = 0;
  for (const auto& segment : j["segments"]) on_part_1 += segment["part"] == 1;
  EXPECT_EQ(on_part_1, 2) << r.output;
  from_env.Kill(SIGTERM);

  // One part down: stat shows the other and says which is unreachable (exit 2).
  m1.Kill(SIGKILL);
  r = Kvpool({"stat", "--pool-file", pool_file, "--timeout-ms", "500"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("part 1  master " + b + "  UNREACHABLE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("part 0  master " + a + "  0 objects"), std::string::npos) << r.output;
  r = Kvpool({"get", "ns/chunk/s1", "-", "--pool-file", pool_file, "--timeout-ms", "500"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("master of part 1"), std::string::npos) << r.output;
  s0.reset();
  s1.reset();
  std::filesystem::remove_all(dir);
}

// A replay reads no KVPOOL_* variable: left over in a shell (the README's demo exports none, but a
// user's shell may), it would make the replay dial a pool that may be gone. Its first line says
// which pool it uses and that the variable was not read.
TEST(Cli, AReplayUsesThePoolItsCommandLineNamesAndSaysWhich) {
  ::setenv("KVPOOL_MASTER", "127.0.0.1:1", 1);
  CliRun r = Kvpool({"--log-level", "warn", "replay", "--synth", "4", "--geometry", "tiny", "--sessions", "1",
                     "--duration", "0", "--requests", "2", "--mode", "pool"});
  ::unsetenv("KVPOOL_MASTER");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("pool: embedded", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("KVPOOL_MASTER set but not read"), std::string::npos) << r.output;
  // Named on the command line, an unreachable pool is an error naming it.
  r = Kvpool({"replay", "--synth", "4", "--geometry", "tiny", "--sessions", "1", "--duration", "0", "--requests", "2",
              "--mode", "pool", "--master", "127.0.0.1:1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("pool: the running pool part0=127.0.0.1:1 (--master)"), std::string::npos) << r.output;
}

// Namespace quotas from the command line: a namespace at its quota evicts its own oldest
// object to take a new one, another namespace's object stays; a malformed quota is refused.
TEST(Cli, ANamespaceQuotaEvictsOnlyItsOwnObjects) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-quota-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CliRun r = Kvpool({"master", "--namespace-quota", "tenant-a"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("NAMESPACE=SIZE"), std::string::npos) << r.output;

  const std::string master = "127.0.0.1:" + std::to_string(PickFreePort());
  ChildProcess m({KVPOOL_BINARY, "master", "--listen", master, "--metrics-listen", "", "--namespace-quota",
                  "tenant-a=3MiB"},
                 dir / "m.log");
  ChildProcess s({KVPOOL_BINARY, "store", "--master", master, "--memory", "32MiB", "--no-huge-pages", "--listen",
                  "127.0.0.1:0", "--shm-dir", dir.string()},
                 dir / "s.log");
  const std::string value = dir / "value";
  std::ofstream(value, std::ios::binary) << std::string(1 << 20, 'q');  // 1 MiB
  for (int attempt = 0; attempt < 200; ++attempt) {  // until the store is mounted
    r = Kvpool({"put", "tenant-b/kept", value, "--master", master, "--timeout-ms", "1000"});
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(r.exit_code, 0) << r.output << m.Log() << s.Log();
  for (int i = 0; i < 4; ++i) {  // the fourth MiB passes tenant-a's quota: its oldest goes
    r = Kvpool({"put", "tenant-a/" + std::to_string(i), value, "--master", master});
    ASSERT_EQ(r.exit_code, 0) << i << r.output;
  }
  EXPECT_EQ(Kvpool({"exists", "tenant-a/0", "--master", master}).exit_code, 1);
  for (const char* key : {"tenant-a/1", "tenant-a/2", "tenant-a/3", "tenant-b/kept"}) {
    EXPECT_EQ(Kvpool({"exists", key, "--master", master}).exit_code, 0) << key;
  }
  std::filesystem::remove_all(dir);
}

// kvpool top against a real pool: frames with the part, its fill and rates, and the segment;
// it ends after --iterations frames (Ctrl-C otherwise).
TEST(Cli, TopShowsThePoolFrameByFrame) {
  PoolCluster cluster({.stores = 1, .store_memory = "16MiB"});
  auto c = cluster.ConnectWhenReady(1);
  ASSERT_TRUE(c) << cluster.Logs();
  const std::string value(1 << 20, 'v');
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c->Put("top/" + std::to_string(i), std::as_bytes(std::span(value))).ok());
  CliRun r = Kvpool({"top", "--master", cluster.master_address(), "--iterations", "2", "--interval", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t frames = 0;
  for (size_t at = 0; (at = r.output.find("kvpool top · 1 part · 1 segment · 4 MiB of 16 MiB used (25.0%) · 4 objects", at)) !=
                      std::string::npos;
       ++at) {
    ++frames;
  }
  EXPECT_EQ(frames, 2u) << r.output;
  EXPECT_NE(r.output.find("part 0 segment"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("   25.0%          4 "), std::string::npos) << r.output;  // the part's fill, objects
  r = Kvpool({"top", "--master", "127.0.0.1:1", "--iterations", "1", "--timeout-ms", "300"});
  EXPECT_NE(r.exit_code, 0);
}

// A role's flags from a configuration file (--config): the file's values, the command line's
// over them, and a key that is no flag refused with the file, line and key, nothing started.
TEST(Cli, AConfigurationFileSetsFlagsTheCommandLineWinsAndUnknownKeysAreRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-config-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "store.toml").string(), bad = (dir / "bad.toml").string();
  std::ofstream(good) << "# a store\nmaster = \"127.0.0.1:1\"\nmemory = \"3GiB\"\nno-huge-pages = true\n";
  std::ofstream(bad) << "master = \"127.0.0.1:1\"\n\nmemroy = \"3GiB\"\n";

  CliRun r = Kvpool({"config", "print", "store", "--config", good});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory = \"3GiB\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("master = \"127.0.0.1:1\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no-huge-pages = true"), std::string::npos) << r.output;  // as the flag means it
  r = Kvpool({"store", "--config", good, "--memory", "5GiB", "--print-config"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory = \"5GiB\""), std::string::npos) << r.output;

  r = Kvpool({"store", "--config", bad});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ":3: memroy is not a flag of kvpool store"), std::string::npos) << r.output;
  r = Kvpool({"master", "--config", (dir / "missing.toml").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("missing.toml"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// Real AgentX trace files (src/trace/testdata/weka-sample, a folder of trace_NNNN.json as
// published), damaged copies and unusable inputs, through `trace stats` and `replay --trace`.
TEST(Cli, TraceInputsSkipWhatIsInvalidAndExit2WhenNothingIsUsable) {
  const std::string sample = std::string(KVPOOL_TRACE_TESTDATA) + "/weka-sample";
  CliRun r = Kvpool({"trace", "stats", sample});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 traces, 247 requests"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reuse ceiling 92.06% of blocks"), std::string::npos) << r.output;

  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-traces-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "empty");
  std::filesystem::copy(sample, dir / "mixed");
  std::ofstream(dir / "mixed" / "trace_9999.json") << R"({"id": "trace_9999", "models": [], "block_size": 64,)";
  r = Kvpool({"trace", "stats", (dir / "mixed").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kvpool trace stats: skipped " + (dir / "mixed" / "trace_9999.json").string() +
                          ": not valid JSON"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("skipped 1 invalid trace(s); 8 loaded"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"skipped_invalid\": 1"), std::string::npos) << r.output;

  r = Kvpool({"trace", "stats", (dir / "mixed").string(), "--strict"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("trace_9999.json: not valid JSON"), std::string::npos) << r.output;
  r = Kvpool({"trace", "stats", (dir / "empty").string()});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("holds no trace files"), std::string::npos) << r.output;
  r = Kvpool({"replay", "--trace", (dir / "empty").string(), "--duration", "10"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = Kvpool({"replay", "--trace", (dir / "nothing-here.jsonl").string(), "--duration", "10"});
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // The folder replays with the AgentX semantics: every byte verified, no failed request.
  r = Kvpool({"--log-level", "warn", "replay", "--trace", (dir / "mixed").string(), "--geometry", "tiny",
              "--prefill-cache-tokens", "250000", "--sessions", "3", "--duration", "0", "--requests", "20",
              "--mode", "pool"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 traces, reuse ceiling 92.06%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("errors          verification 0 · failed requests 0"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Cli, PlanPrintsReuseBySizeWritesJsonAndAPlotAndRefusesBadSizes) {
  const auto dir = std::filesystem::temp_directory_path() / ("kvpool-cli-plan-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string json = (dir / "plan.json").string(), svg = (dir / "plan.svg").string();
  CliRun r = Kvpool({"plan", "--synth", "12", "--synth-turn-scale", "0.3", "--geometry", "tiny", "--sessions", "3",
                     "--duration", "300", "--pool", "1.5M,0,256K", "--json", json, "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pool tokens"), std::string::npos) << r.output;
  const nlohmann::json plan = nlohmann::json::parse(std::ifstream(json));
  ASSERT_EQ(plan["points"].size(), 3u) << plan.dump();
  EXPECT_EQ(plan["points"][0]["pool_tokens"], 0);  // sorted; 0 is no pool
  EXPECT_EQ(plan["points"][0]["pool_share"], 0.0);
  EXPECT_EQ(plan["points"][2]["pool_tokens"], 1'500'000);
  EXPECT_GT(plan["points"][2]["pool_share"].get<double>(), 0);
  std::stringstream drawn;
  drawn << std::ifstream(svg).rdbuf();
  EXPECT_EQ(drawn.str().rfind("<svg", 0), 0u);
  EXPECT_NE(drawn.str().find("ceiling"), std::string::npos);

  // A trace folder as the positional argument.
  r = Kvpool({"plan", std::string(KVPOOL_TRACE_TESTDATA) + "/weka-sample", "--geometry", "tiny",
              "--prefill-cache-tokens", "250000", "--sessions", "2", "--duration", "300", "--pool", "1M"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 traces"), std::string::npos) << r.output;

  r = Kvpool({"plan", "--synth", "4", "--pool", "12XB"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'12XB' is not a token count"), std::string::npos) << r.output;
  r = Kvpool({"plan", "--synth", "4", "--pool", "1M", "--topology", "4x8-6p2d"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("one router group"), std::string::npos) << r.output;
  r = Kvpool({"plan", "--synth", "4", "--geometry", "tiny", "--pool", "1M", "--duration", "60", "--json",
              (dir / "no-such-folder" / "plan.json").string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--json"), std::string::npos) << r.output;
  r = Kvpool({"plan", "--pool", "1M"});  // no trace
  EXPECT_NE(r.exit_code, 0) << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvpool::testing
