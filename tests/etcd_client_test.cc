// EtcdClient and PartLeader against a real etcd (Debian's etcd-server).
#include "etcd/etcd_client.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "etcd/part_leader.h"
#include "etcd/store_registry.h"
#include "test_etcd.h"

namespace kvpool::etcd {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr milliseconds kTimeout{2000};

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::TestEtcd::Installed()) GTEST_SKIP() << "no /usr/bin/etcd (apt-get install etcd-server)";
    dir_ = std::filesystem::temp_directory_path() / ("kvpool-etcd-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    server_ = std::make_unique<testing::TestEtcd>(dir_);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = *EtcdClient::Create(server_->endpoint());
  }
  void TearDown() override {
    server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::filesystem::path dir_;
  std::unique_ptr<testing::TestEtcd> server_;
  std::unique_ptr<EtcdClient> client_;
};

TEST(EtcdEndpointsTest, MalformedListsAreRefusedWithTheEndpointNamed) {
  EXPECT_EQ(EtcdClient::Create("").status().code(), StatusCode::kInvalidArgument);
  auto bad = EtcdClient::Create("127.0.0.1:2379,nonsense");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("nonsense"), std::string::npos);
  auto tls = EtcdClient::Create("https://127.0.0.1:2379");
  EXPECT_NE(tls.status().message().find("TLS"), std::string::npos);
  EXPECT_TRUE(EtcdClient::Create("http://127.0.0.1:2379/,127.0.0.1:2380").ok());
}

TEST_F(EtcdClientTest, ALeaseLivesWhileKeptAliveAndIsGoneOnceRevoked) {
  auto lease = client_->GrantLease(seconds(5), kTimeout);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_GE(lease->ttl.count(), 5);
  auto ttl = client_->KeepAlive(lease->id, kTimeout);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_GE(ttl->count(), 4);
  ASSERT_TRUE(client_->RevokeLease(lease->id, kTimeout).ok());
  EXPECT_EQ(client_->KeepAlive(lease->id, kTimeout).status().code(), StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, KeysUnderALeaseAreListedByPrefixUntilTheLeaseEnds) {
  auto lease = client_->GrantLease(seconds(5), kTimeout);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("a/x", "1", lease->id, kTimeout).ok());
  ASSERT_TRUE(client_->Put("a/y", "2", 0, kTimeout).ok());
  ASSERT_TRUE(client_->Put("b/z", "3", 0, kTimeout).ok());
  using Listed = std::vector<std::pair<std::string, std::string>>;
  auto listed = client_->List("a/", kTimeout);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, (Listed{{"a/x", "1"}, {"a/y", "2"}}));
  ASSERT_TRUE(client_->RevokeLease(lease->id, kTimeout).ok());
  EXPECT_EQ(*client_->List("a/", kTimeout), (Listed{{"a/y", "2"}}));
  EXPECT_EQ(client_->List("", kTimeout).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Put("c", "4", lease->id, kTimeout).code(), StatusCode::kNotFound) << "a revoked lease";
}

TEST_F(EtcdClientTest, AStoreIsRegisteredWhileItsRegistrationLivesAndLeavesWithIt) {
  std::shared_ptr<EtcdClient> etcd = *EtcdClient::Create(server_->endpoint());
  auto registration = std::make_unique<StoreRegistration>(etcd, 3, "store-a", "127.0.0.1:7000", seconds(2));
  for (int i = 0; i < 200 && !registration->registered(); ++i) std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(registration->registered());
  EXPECT_EQ(*RegisteredStores(*client_, 3, kTimeout), (std::set<std::string>{"store-a"}));
  EXPECT_TRUE(RegisteredStores(*client_, 4, kTimeout)->empty()) << "another part's registry";
  EXPECT_TRUE(client_->GetLeader(PartElection(3), kTimeout).status().code() == StatusCode::kNotFound)
      << "a registered store is no campaigner in the part's election";
  registration.reset();
  EXPECT_TRUE(RegisteredStores(*client_, 3, kTimeout)->empty()) << "revoked on destruction";
}

TEST_F(EtcdClientTest, TheFirstCampaignerLeadsAndTheNextTakesOverWhenItResigns) {
  auto a = client_->GrantLease(seconds(10), kTimeout);
  auto b = client_->GrantLease(seconds(10), kTimeout);
  ASSERT_TRUE(a.ok() && b.ok());
  Canceller never;
  auto won = client_->Campaign("kvpool-test/e1", a->id, "127.0.0.1:1111", &never);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  auto leader = client_->GetLeader("kvpool-test/e1", kTimeout);
  ASSERT_TRUE(leader.ok()) << leader.status().ToString();
  EXPECT_EQ(leader->value, "127.0.0.1:1111");
  EXPECT_EQ(leader->term, won->term);

  auto second = std::async(std::launch::async,
                           [&] { return client_->Campaign("kvpool-test/e1", b->id, "127.0.0.1:2222", &never); });
  EXPECT_EQ(second.wait_for(milliseconds(300)), std::future_status::timeout) << "b must wait while a leads";
  ASSERT_TRUE(client_->Resign(*won, kTimeout).ok());
  auto b_won = second.get();
  ASSERT_TRUE(b_won.ok()) << b_won.status().ToString();
  EXPECT_GT(b_won->term, won->term);
  EXPECT_EQ(client_->GetLeader("kvpool-test/e1", kTimeout)->value, "127.0.0.1:2222");
}

TEST_F(EtcdClientTest, LeadershipEndsWithItsLease) {
  auto a = client_->GrantLease(seconds(2), kTimeout);
  auto b = client_->GrantLease(seconds(30), kTimeout);
  Canceller never;
  ASSERT_TRUE(client_->Campaign("kvpool-test/e2", a->id, "a:1", &never).ok());
  // a is never kept alive: its lease runs out and b leads without anyone resigning.
  auto b_won = client_->Campaign("kvpool-test/e2", b->id, "b:2", &never);
  ASSERT_TRUE(b_won.ok()) << b_won.status().ToString();
  EXPECT_EQ(client_->GetLeader("kvpool-test/e2", kTimeout)->value, "b:2");
}

TEST_F(EtcdClientTest, ABlockedCampaignCanBeCancelled) {
  auto a = client_->GrantLease(seconds(30), kTimeout);
  auto b = client_->GrantLease(seconds(30), kTimeout);
  Canceller never, cancel;
  ASSERT_TRUE(client_->Campaign("kvpool-test/e3", a->id, "a:1", &never).ok());
  auto waiting = std::async(std::launch::async, [&] { return client_->Campaign("kvpool-test/e3", b->id, "b:2", &cancel); });
  cancel.Cancel();
  EXPECT_FALSE(waiting.get().ok());
  EXPECT_EQ(client_->GetLeader("kvpool-test/e3", kTimeout)->value, "a:1");
}

TEST_F(EtcdClientTest, NoLeaderIsNotFoundAndADeadEndpointIsSkipped) {
  const std::string dead = "127.0.0.1:" + std::to_string(testing::PickFreePort());
  auto client = *EtcdClient::Create(dead + "," + server_->endpoint());
  EXPECT_EQ(client->GetLeader("kvpool-test/nobody", kTimeout).status().code(), StatusCode::kNotFound);
  auto lease = client->GrantLease(seconds(5), kTimeout);
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  auto only_dead = *EtcdClient::Create(dead);
  EXPECT_EQ(only_dead->GrantLease(seconds(5), milliseconds(300)).status().code(), StatusCode::kUnavailable);
}

TEST_F(EtcdClientTest, PartLeaderNamesTheLeadersAddressAndRefusesAMalformedOne) {
  std::shared_ptr<EtcdClient> shared = std::move(client_);
  PartLeader part3(shared, 3);
  EXPECT_EQ(part3.Find(kTimeout).status().code(), StatusCode::kNotFound);
  auto lease = shared->GrantLease(seconds(30), kTimeout);
  Canceller never;
  ASSERT_TRUE(shared->Campaign(PartElection(3), lease->id, "127.0.0.1:4242", &never).ok());
  auto found = part3.Find(kTimeout);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->value, "127.0.0.1:4242");

  auto lease7 = shared->GrantLease(seconds(30), kTimeout);
  ASSERT_TRUE(shared->Campaign(PartElection(7), lease7->id, "not an address", &never).ok());
  EXPECT_EQ(PartLeader(shared, 7).Find(kTimeout).status().code(), StatusCode::kInternal);
}

TEST_F(EtcdClientTest, ARestartedEtcdIsUsedAgainAndKeepsItsLeader) {
  auto lease = client_->GrantLease(seconds(30), kTimeout);
  Canceller never;
  ASSERT_TRUE(client_->Campaign("kvpool-test/e4", lease->id, "a:1", &never).ok());
  server_->Kill();
  EXPECT_FALSE(client_->GetLeader("kvpool-test/e4", milliseconds(300)).ok());
  ASSERT_TRUE(server_->Start()) << server_->Log();
  auto leader = client_->GetLeader("kvpool-test/e4", kTimeout);
  ASSERT_TRUE(leader.ok()) << leader.status().ToString();
  EXPECT_EQ(leader->value, "a:1");
  EXPECT_TRUE(client_->KeepAlive(lease->id, kTimeout).ok());
}

}  // namespace
}  // namespace kvpool::etcd
