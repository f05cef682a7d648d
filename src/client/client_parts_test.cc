// A Client over a pool of several parts, each a real master with a storage service (in this
// process, on loopback).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/client.h"
#include "embedded/embedded_pool.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"
#include "store/storage_service.h"

namespace kvpool::client {
namespace {

std::unique_ptr<embedded::EmbeddedPool> StartPart(uint32_t part) {
  auto pool = embedded::EmbeddedPool::Start({.memory_bytes = 16 << 20, .part = part});
  EXPECT_TRUE(pool.ok()) << pool.status().ToString();
  return pool.ok() ? std::move(pool).value() : nullptr;
}

std::string ValueOf(const std::string& key) { return key + std::string(1000, static_cast<char>(key.size())); }

class ClientPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint32_t k = 0; k < 3; ++k) {
      parts_.push_back(StartPart(k));
      ASSERT_TRUE(parts_.back());
      options_.pool.masters.push_back(parts_.back()->address());
    }
    options_.pool.masters.erase(options_.pool.masters.begin());  // drop the default address
    options_.rpc_timeout = std::chrono::milliseconds(2000);
  }

  std::unique_ptr<Client> Connect() {
    auto c = Client::Connect(options_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::vector<std::string> Keys(int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back("k" + std::to_string(i));
    for (uint32_t s = 0; s < 6; ++s) keys.push_back("ns/chunk/s" + std::to_string(s));
    return keys;
  }

  void PutAll(Client& c, const std::vector<std::string>& keys) {
    std::vector<std::string> values;
    for (const auto& k : keys) values.push_back(ValueOf(k));
    std::vector<ValueView> views;
    for (const auto& v : values) views.push_back(std::as_bytes(std::span(v)));
    for (const Status& s : c.BatchPut(keys, views)) ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<std::unique_ptr<embedded::EmbeddedPool>> parts_;
  ClientOptions options_;
};

TEST_F(ClientPartsTest, EveryKeyLivesInItsPartAndReadsBack) {
  auto c = Connect();
  ASSERT_TRUE(c);
  const auto keys = Keys(200);
  PutAll(*c, keys);

  std::vector<uint64_t> expected(3);
  for (const auto& k : keys) ++expected[c->pool().PartOf(k)];
  auto stats = c->Stat();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->parts.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(stats->parts[k].status.ok());
    EXPECT_EQ(stats->parts[k].objects, expected[k]) << "part " << k;
    EXPECT_GT(expected[k], 0u);
  }
  EXPECT_EQ(stats->objects, keys.size());
  EXPECT_EQ(stats->segments.size(), 3u);
  // Stage objects follow their stage: s0 and s3 in part 0, s1 and s4 in part 1, ...
  EXPECT_EQ(c->pool().PartOf("ns/chunk/s4"), 1u);

  std::vector<std::string> buffers(keys.size(), std::string(2000, '\0'));
  std::vector<ValueBuffer> views;
  for (auto& b : buffers) views.push_back(std::as_writable_bytes(std::span(b)));
  auto read = c->BatchGetInto(keys, views);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(read[i].ok()) << keys[i] << ": " << read[i].status().ToString();
    EXPECT_EQ(buffers[i].substr(0, *read[i]), ValueOf(keys[i]));
  }
  const std::vector<std::string> probe = {keys[0], keys[1], "absent"};
  auto exists = c->BatchExists(probe);
  ASSERT_TRUE(exists.ok());
  EXPECT_EQ(*exists, (std::vector<bool>{true, true, false}));
  for (const Status& s : c->BatchRemove(keys)) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c->Get(keys[5]).status().code(), StatusCode::kNotFound);
}

// Router hints reach the part of every key: retained there, then released.
TEST_F(ClientPartsTest, RetainAndReleaseReachEveryKeysPart) {
  auto c = Connect();
  ASSERT_TRUE(c);
  const std::vector<std::string> all = Keys(200);
  PutAll(*c, all);
  // A few of them: a part retains at most half of its units.
  std::vector<std::string> keys(all.begin(), all.begin() + 20);
  keys.push_back("absent");
  auto retained = [&] {
    uint64_t units = 0;
    for (auto& part : parts_) units += part->master().pool()->Stat().retained_units;
    return units;
  };
  const std::vector<Status> kept = c->Retain(keys, std::chrono::minutes(1));
  for (size_t i = 0; i + 1 < keys.size(); ++i) EXPECT_TRUE(kept[i].ok()) << keys[i] << ": " << kept[i].ToString();
  EXPECT_EQ(kept.back().code(), StatusCode::kNotFound);
  EXPECT_EQ(retained(), keys.size() - 1);  // ungrouped: a unit per key
  for (const Status& s : c->Retain(keys, std::chrono::milliseconds(0))) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const Status& s : c->Retain(keys, std::chrono::minutes(1), std::chrono::milliseconds(-1))) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
  // Expected at once (a queued turn): moves what the retained units expect, no more units.
  const std::vector<Status> queued = c->Retain(keys, std::chrono::minutes(1), std::chrono::milliseconds(0));
  for (size_t i = 0; i + 1 < keys.size(); ++i) EXPECT_TRUE(queued[i].ok()) << keys[i] << ": " << queued[i].ToString();
  EXPECT_EQ(retained(), keys.size() - 1);
  keys.pop_back();
  for (const Status& s : c->Release(keys)) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(retained(), 0u);
}

TEST_F(ClientPartsTest, APartThatStopsFailsOnlyItsOwnKeys) {
  auto c = Connect();
  ASSERT_TRUE(c);
  const auto keys = Keys(60);
  PutAll(*c, keys);
  parts_[1].reset();  // part 1's master and store are gone

  LookupResult lookup = c->BatchLookup(keys);
  size_t lost = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (c->pool().PartOf(keys[i]) == 1) {
      ++lost;
      EXPECT_EQ(lookup.length(i).status().code(), StatusCode::kUnavailable) << lookup.length(i).status().ToString();
    } else {
      ASSERT_TRUE(lookup.length(i).ok()) << keys[i];
      auto value = c->Get(keys[i]);
      ASSERT_TRUE(value.ok());
      EXPECT_EQ(*value, ValueOf(keys[i]));
    }
  }
  EXPECT_GT(lost, 0u);
  auto stats = c->Stat();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->unreachable_parts(), 1u);
  EXPECT_FALSE(stats->parts[1].status.ok());
  EXPECT_EQ(stats->objects, keys.size() - lost);
}

TEST_F(ClientPartsTest, ConnectRefusesAWrongPoolList) {
  ClientOptions swapped = options_;
  std::swap(swapped.pool.masters[0], swapped.pool.masters[1]);
  auto c = Client::Connect(swapped);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("listed as part 0 but its master serves part 1"), std::string::npos)
      << c.status().message();

  // One master under two spellings of its address (gRPC's "ipv4:" target needs no resolver).
  ClientOptions twice;
  twice.pool.masters = {parts_[0]->address(), "ipv4:" + parts_[0]->address()};
  auto d = Client::Connect(twice);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("same master"), std::string::npos) << d.status().message();

  ClientOptions unreachable = options_;
  parts_[2].reset();
  unreachable.rpc_timeout = std::chrono::milliseconds(300);
  auto e = Client::Connect(unreachable);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(e.status().message().find("master of part 2"), std::string::npos) << e.status().message();
}

TEST_F(ClientPartsTest, AStoreOfAnotherPartIsRefused) {
  store::StorageOptions so;
  so.master_address = parts_[0]->address();
  so.part = 1;
  so.memory_bytes = 2 << 20;
  so.tcp_listen = "127.0.0.1:0";
  so.use_huge_pages = false;
  auto service = store::StorageService::Start(so);
  ASSERT_FALSE(service.ok());
  EXPECT_EQ(service.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(service.status().message().find("joins part 1, but this master serves part 0"), std::string::npos)
      << service.status().message();
  auto c = Connect();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->Stat()->segments.size(), 3u);  // nothing joined
}

}  // namespace
}  // namespace kvpool::client
