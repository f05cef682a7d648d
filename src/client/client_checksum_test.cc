// End-to-end checksums through a real pool (a master and storage services in this process):
// bytes that went bad inside a store are never handed to a reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/checksum.h"
#include "embedded/embedded_pool.h"
#include "store/storage_service.h"
#include "store/test_corruption.h"

namespace kvpool::client {
namespace {

std::string RandomValue(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::string v(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t word = rng();
    std::memcpy(v.data() + i, &word, std::min<size_t>(8, n - i));
  }
  return v;
}

ValueView View(const std::string& s) { return std::as_bytes(std::span(s)); }

// Every read is hashed by the transport as it lands: over shm and over tcp alike.
class ClientChecksumTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { StartPool(16 << 20); }

  void StartPool(uint64_t memory_bytes) {
    client_.reset();
    auto pool = embedded::EmbeddedPool::Start({.memory_bytes = memory_bytes});
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
    ClientOptions o;
    o.pool = PoolParts::Single(pool_->address());
    o.transfer.allow_shm = std::string(GetParam()) == "shm";
    auto c = Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }

  // A second store on the same master, so objects can have two copies.
  void StartSecondStore() {
    store::StorageOptions o;
    o.master_address = pool_->address();
    o.memory_bytes = 16 << 20;
    o.tcp_listen = "127.0.0.1:0";
    o.use_huge_pages = false;
    o.heartbeat_interval = std::chrono::milliseconds(200);
    auto s = store::StorageService::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    second_ = std::move(s).value();
  }

  std::unique_ptr<embedded::EmbeddedPool> pool_;
  std::unique_ptr<store::StorageService> second_;
  std::unique_ptr<Client> client_;
};

TEST_P(ClientChecksumTest, AFlippedBitInTheStoreIsAMissNeverBytesServed) {
  const std::string value = RandomValue(1 << 20, 1), other = RandomValue(4096, 2);
  ASSERT_TRUE(client_->Put("bad", View(value)).ok());
  ASSERT_TRUE(client_->Put("good", View(other)).ok());
  ASSERT_TRUE(store::testing::FlipBitOfStoredValue(pool_->store(), View(value)));

  EXPECT_EQ(client_->Get("bad").status().code(), StatusCode::kCorrupt);
  std::string buffer(value.size(), '\0');
  EXPECT_EQ(client_->GetInto("bad", std::as_writable_bytes(std::span(buffer))).status().code(), StatusCode::kCorrupt);
  // One bad object in a batch costs only itself.
  const std::vector<std::string> keys = {"good", "bad"};
  std::string good_buffer(other.size(), '\0');
  const std::vector<ValueBuffer> buffers = {std::as_writable_bytes(std::span(good_buffer)),
                                            std::as_writable_bytes(std::span(buffer))};
  const auto batch = client_->BatchGetInto(keys, buffers);
  ASSERT_TRUE(batch[0].ok()) << batch[0].status().ToString();
  EXPECT_EQ(good_buffer, other);
  EXPECT_EQ(batch[1].status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(client_->checksum_mismatches(), 3u);

  // The key can be removed and put again, and then reads back whole.
  ASSERT_TRUE(client_->Remove("bad").ok());
  ASSERT_TRUE(client_->Put("bad", View(value)).ok());
  auto again = client_->Get("bad");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, value);
}

TEST_P(ClientChecksumTest, ABadCopyIsSkippedForAGoodOne) {
  StartSecondStore();
  const std::string value = RandomValue(256 << 10, 3);
  ASSERT_TRUE(client_->Put("twice", View(value), PutOptions{.replicas = 2}).ok());
  ASSERT_TRUE(store::testing::FlipBitOfStoredValue(pool_->store(), View(value)));
  auto got = client_->Get("twice");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  // The first copy tried is the bad one only if the reader went to that store first.
  EXPECT_LE(client_->checksum_mismatches(), 1u);
  ASSERT_TRUE(store::testing::FlipBitOfStoredValue(*second_, View(value)));
  EXPECT_EQ(client_->Get("twice").status().code(), StatusCode::kCorrupt);
}

// What a reader of mapped bytes checks them against (the restore's zero-copy path).
TEST_P(ClientChecksumTest, TheLookupCarriesTheWritersChecksum) {
  const std::string value = RandomValue(8192, 4);
  ASSERT_TRUE(client_->Put("k", View(value)).ok());
  auto lookup = client_->BatchLookup(std::vector<std::string>{"k"});
  ASSERT_TRUE(lookup.length(0).ok());
  EXPECT_EQ(lookup.checksum(0), Checksum(View(value)));
}

// A value too long for the transport to hash as it lands is hashed after the read instead.
TEST_P(ClientChecksumTest, AValueTooLongToHashAsItLandsIsCheckedAfterTheRead) {
  StartPool(80 << 20);
  const std::string value = RandomValue(transfer::kMaxHashedReadBytes + 4096, 5);
  ASSERT_TRUE(client_->Put("long", View(value)).ok());
  auto got = client_->Get("long");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == value);
  ASSERT_TRUE(store::testing::FlipBitOfStoredValue(pool_->store(), View(value)));
  EXPECT_EQ(client_->Get("long").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(client_->checksum_mismatches(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Transports, ClientChecksumTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace kvpool::client
