// Master high availability, with real processes: etcd (Debian's etcd-server), several
// `kvpool master --etcd` processes for one part, two `kvpool store --etcd` processes, and a
// client that follows the leader. The leader is killed (-9), stopped (SIGSTOP past its lease:
// a split brain once it runs again), or asked to hand over (SIGTERM).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "client/client.h"
#include "etcd/part_leader.h"
#include "test_etcd.h"

namespace kvpool::testing {
namespace {

using std::chrono::milliseconds;

client::ValueView Bytes(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

class MasterFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TestEtcd::Installed()) GTEST_SKIP() << "no /usr/bin/etcd (apt-get install etcd-server)";
    dir_ = std::filesystem::temp_directory_path() / ("kvpool-failover-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    etcd_ = std::make_unique<TestEtcd>(dir_);
    ASSERT_TRUE(etcd_->Start()) << etcd_->Log();
    leader_ = std::make_unique<etcd::PartLeader>(std::shared_ptr<etcd::EtcdClient>(*etcd::EtcdClient::Create(etcd_->endpoint())), 0);
    for (int i = 0; i < 2; ++i) StartMaster();
    ASSERT_TRUE(WaitForLeader("").has_value()) << Logs();
    for (int i = 0; i < 2; ++i) {
      stores_.push_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{KVPOOL_BINARY, "store", "--etcd", etcd_->endpoint(), "--memory", "32MiB", "--listen",
                                   "127.0.0.1:0", "--shm-dir", dir_.string(), "--no-huge-pages",
                                   "--heartbeat-interval-ms", "200", "--registration-ttl-s",
                                   std::to_string(registration_ttl_s_)},
          (dir_ / ("store" + std::to_string(i) + ".log")).string()));
    }
    client_ = ConnectWhenReady(client::PoolParts::Elected(etcd_->endpoint(), 1));
    ASSERT_NE(client_, nullptr) << Logs();
  }
  void TearDown() override {
    client_.reset();
    stores_.clear();
    masters_.clear();
    etcd_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void StartMaster() {
    const std::string address = "127.0.0.1:" + std::to_string(PickFreePort());
    addresses_.push_back(address);
    masters_.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{KVPOOL_BINARY, "master", "--listen", address, "--metrics-listen", "", "--etcd",
                                 etcd_->endpoint(), "--heartbeat-ttl-ms", "1500", "--lease-ms", "2000",
                                 // Far beyond any test's patience: a new leader answers clients
                                 // because its stores rejoined (or left etcd's registry), not
                                 // because a guessed time ran out.
                                 "--takeover-grace-ms", "60000"},
        (dir_ / ("master" + std::to_string(masters_.size()) + ".log")).string()));
  }

  // Waits (up to 20 s) until etcd names a leader other than `not_this`; its index.
  std::optional<size_t> WaitForLeader(const std::string& not_this) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto found = leader_->Find(milliseconds(500));
      if (found.ok() && found->value != not_this) {
        for (size_t i = 0; i < addresses_.size(); ++i) {
          if (addresses_[i] == found->value) return i;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return std::nullopt;
  }

  std::unique_ptr<client::Client> ConnectWhenReady(client::PoolParts pool) {
    client::ClientOptions o;
    o.pool = std::move(pool);
    o.rpc_timeout = milliseconds(8000);  // a failover (lease ttl 2 s + the stores' rejoin) fits in one call
    o.transfer_timeout = milliseconds(5000);
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto c = client::Client::Connect(o);
      if (c.ok()) {
        auto s = (*c)->Stat();
        if (s.ok() && s->segments.size() == stores_.size()) return std::move(c.value());
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    return nullptr;
  }

  // A client pinned to one master's address, as a client that never asks etcd would be.
  static Result<std::unique_ptr<client::Client>> PinnedTo(const std::string& address, milliseconds rpc_timeout) {
    client::ClientOptions o;
    o.pool = client::PoolParts::Single(address);
    o.rpc_timeout = rpc_timeout;
    return client::Client::Connect(o);
  }

  // Puts `n` random values (groups of 4 keys) and returns them by key.
  std::map<std::string, std::string> PutSome(const std::string& prefix, int n) {
    std::map<std::string, std::string> values;
    std::mt19937_64 random(n);
    for (int i = 0; i < n; ++i) {
      std::string value(1000 + random() % 60000, '\0');
      for (char& c : value) c = static_cast<char>(random());
      const std::string key = prefix + std::to_string(i);
      client::PutOptions options;
      options.group = prefix + "g" + std::to_string(i / 4);
      Status s = client_->Put(key, Bytes(value), options);
      EXPECT_TRUE(s.ok()) << key << ": " << s.ToString();
      values[key] = std::move(value);
    }
    return values;
  }

  // Every value comes back with its bytes.
  void ExpectServed(const std::map<std::string, std::string>& values) {
    for (const auto& [key, value] : values) {
      auto got = client_->Get(key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString() << "\n" << Logs();
      ASSERT_EQ(*got, value) << key;
    }
  }

  std::string Logs() const {
    std::string all;
    for (size_t i = 0; i < masters_.size(); ++i) all += "--- master " + std::to_string(i) + "\n" + masters_[i]->Log();
    for (size_t i = 0; i < stores_.size(); ++i) all += "--- store " + std::to_string(i) + "\n" + stores_[i]->Log();
    return all;
  }

  int registration_ttl_s_ = 3;  // the stores' --registration-ttl-s
  std::filesystem::path dir_;
  std::unique_ptr<TestEtcd> etcd_;
  std::unique_ptr<etcd::PartLeader> leader_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<ChildProcess>> masters_;
  std::vector<std::unique_ptr<ChildProcess>> stores_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(MasterFailoverTest, AKilledLeaderIsReplacedAndEveryObjectIsServedWithItsBytesAndSpace) {
  const auto values = PutSome("a", 60);
  auto before = client_->Stat();
  ASSERT_TRUE(before.ok());
  const size_t first = *WaitForLeader("");
  masters_[first]->Kill(SIGKILL);

  // The same client, unchanged: its next calls find the new leader through etcd.
  ExpectServed(values);
  const auto next = WaitForLeader(addresses_[first]);
  ASSERT_TRUE(next.has_value());
  auto after = client_->Stat();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->objects, before->objects);
  EXPECT_EQ(after->used_bytes, before->used_bytes) << "capacity accounting is exact across the failover";
  EXPECT_EQ(after->capacity_bytes, before->capacity_bytes);
  // Stat names the leader's term (`kvpool stat` shows it): a new leader serves a later one.
  ASSERT_EQ(before->parts.size(), 1u);
  EXPECT_GT(before->parts[0].term, 0);
  EXPECT_GT(after->parts[0].term, before->parts[0].term);
  // The new leader places new objects around the old ones, never on them.
  const auto more = PutSome("b", 40);
  ExpectServed(values);
  ExpectServed(more);

  // A restarted master is a standby; killing the second leader hands the part back to it.
  StartMaster();
  masters_[*next]->Kill(SIGKILL);
  ExpectServed(values);
  ExpectServed(more);
}

// Stores that stay registered in etcd for 60 s after they stop renewing (a paused store).
class MasterFailoverLongRegistrationTest : public MasterFailoverTest {
 protected:
  void SetUp() override {
    registration_ttl_s_ = 60;
    MasterFailoverTest::SetUp();
  }
};

TEST_F(MasterFailoverLongRegistrationTest, ANewLeaderAnswersNoClientUntilEveryRegisteredStoreHasRejoined) {
  const auto values = PutSome("w", 40);
  ::kill(stores_[0]->pid(), SIGSTOP);  // a store too slow to rejoin, however long it is given
  const size_t first = *WaitForLeader("");
  masters_[first]->Kill(SIGKILL);
  ASSERT_TRUE(WaitForLeader(addresses_[first]).has_value()) << Logs();

  // A leader that answered now would report store 0's keys missing: it answers nobody.
  client::ClientOptions o;
  o.pool = client::PoolParts::Elected(etcd_->endpoint(), 1);
  o.rpc_timeout = milliseconds(2000);
  auto impatient = client::Client::Connect(o);
  ASSERT_TRUE(impatient.ok()) << impatient.status().ToString();
  for (const std::string key : {"w0", "w39"}) {
    auto got = (*impatient)->Get(key);
    ASSERT_FALSE(got.ok()) << key << " answered while a registered store has not rejoined";
    EXPECT_TRUE(got.status().code() == StatusCode::kUnavailable || got.status().code() == StatusCode::kTimeout)
        << key << ": " << got.status().ToString();
  }

  ::kill(stores_[0]->pid(), SIGCONT);
  ExpectServed(values);
  EXPECT_NE(masters_[*WaitForLeader(addresses_[first])]->Log().find("every store registered in etcd has rejoined"),
            std::string::npos)
      << Logs();
}

TEST_F(MasterFailoverTest, AStoreThatDiedWithTheLeaderHoldsClientsUpOnlyUntilItsRegistrationEnds) {
  const auto values = PutSome("d", 40);
  const size_t first = *WaitForLeader("");
  stores_[0]->Kill(SIGKILL);
  masters_[first]->Kill(SIGKILL);

  // The new leader waits for store 0 until its registration (3 s) ends, far short of the
  // 60 s takeover bound; then store 1's objects are served and store 0's are missing.
  client::ClientOptions o;
  o.pool = client::PoolParts::Elected(etcd_->endpoint(), 1);
  o.rpc_timeout = milliseconds(30000);
  auto patient = client::Client::Connect(o);
  ASSERT_TRUE(patient.ok()) << patient.status().ToString();
  int served = 0, missing = 0;
  for (const auto& [key, value] : values) {
    auto got = (*patient)->Get(key);
    if (got.ok()) {
      EXPECT_EQ(*got, value) << key;
      ++served;
    } else {
      EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << key << ": " << got.status().ToString();
      ++missing;
    }
  }
  EXPECT_GT(served, 0) << Logs();
  EXPECT_GT(missing, 0) << Logs();
  EXPECT_NE(masters_[*WaitForLeader(addresses_[first])]->Log().find("every store registered in etcd has rejoined"),
            std::string::npos)
      << Logs();
}

TEST_F(MasterFailoverTest, SigtermHandsLeadershipOverBeforeTheLeaderExits) {
  const auto values = PutSome("h", 20);
  const size_t first = *WaitForLeader("");
  EXPECT_EQ(masters_[first]->Kill(SIGTERM), 0) << "a clean exit";
  const auto next = WaitForLeader(addresses_[first]);
  ASSERT_TRUE(next.has_value()) << Logs();
  EXPECT_NE(masters_[first]->Log().find("resigned"), std::string::npos) << Logs();
  ExpectServed(values);
}

TEST_F(MasterFailoverTest, APausedLeaderThatWakesUpDeposedServesNothing) {
  const auto values = PutSome("s", 20);
  const size_t first = *WaitForLeader("");
  auto pinned = PinnedTo(addresses_[first], milliseconds(2000));
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();

  ::kill(masters_[first]->pid(), SIGSTOP);
  const auto next = WaitForLeader(addresses_[first]);
  ASSERT_TRUE(next.has_value()) << Logs();
  ExpectServed(values);  // stores rejoined the new leader
  const auto fresh = PutSome("t", 10);
  ::kill(masters_[first]->pid(), SIGCONT);

  // Two masters now believe in different terms for a moment; the old one must not answer
  // from its stale pool: neither a read nor a put. The reads ask for keys the old leader
  // still holds in its index, whose bytes are still where it put them: only its fencing can
  // refuse them (a key put after the pause would be refused by a stale pool as NOT_FOUND).
  for (const auto& [key, value] : values) {
    auto got = (*pinned)->Get(key);
    EXPECT_FALSE(got.ok()) << key << " served by a deposed leader";
    // Fenced: its lease is not certainly alive, so it refuses as a standby would (the client
    // may give up at its deadline while retrying that refusal).
    EXPECT_TRUE(got.status().code() == StatusCode::kUnavailable || got.status().code() == StatusCode::kTimeout)
        << key << ": " << got.status().ToString();
  }
  std::string v(100, 'x');
  EXPECT_FALSE((*pinned)->Put("from-deposed", Bytes(v)).ok());
  ExpectServed(values);
  ExpectServed(fresh);
}

TEST_F(MasterFailoverTest, WithoutEtcdTheLeaderStopsServingAndWithEtcdBackThePoolIsServedAgain) {
  const auto values = PutSome("e", 20);
  const size_t first = *WaitForLeader("");
  auto pinned = PinnedTo(addresses_[first], milliseconds(1000));
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  const std::string key = values.begin()->first;
  ASSERT_TRUE((*pinned)->Get(key).ok());

  etcd_->Kill();
  // The leader cannot renew its lease, so within the lease it stops answering: it cannot know
  // that no other master leads.
  bool stopped = false;
  for (int attempt = 0; attempt < 100 && !stopped; ++attempt) {
    stopped = !(*pinned)->Get(key).ok();
    if (!stopped) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(stopped) << "a leader without etcd kept serving\n" << Logs();

  ASSERT_TRUE(etcd_->Start()) << etcd_->Log();
  ExpectServed(values);  // the same leader again (etcd kept its lease) or a new one the stores rejoined
}

}  // namespace
}  // namespace kvpool::testing
