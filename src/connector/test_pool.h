// Test-only: a real pool in this process (MasterServer + one StorageService on loopback), the
// pool an engine test runs against (that one, or test_local_pool.h's for ThreadSanitizer), and
// a ChunkStore decorator that delays or fails chosen reads and puts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/client.h"
#include "connector/chunk_store.h"
#include "connector/test_local_pool.h"
#include "embedded/embedded_pool.h"
#include "store/storage_service.h"
#include "store/test_corruption.h"

namespace kvpool::connector::testing {

// `parts` parts, each a master with one storage service of `memory` bytes.
class InProcessPool {
 public:
  explicit InProcessPool(uint64_t lease_ms = 5000, uint64_t memory = 64 << 20, uint32_t parts = 1) {
    client::ClientOptions co;
    co.pool.masters.clear();
    for (uint32_t k = 0; k < parts; ++k) {
      auto pool = embedded::EmbeddedPool::Start({.memory_bytes = memory, .lease_ms = lease_ms,
                                                 .heartbeat_interval = std::chrono::milliseconds(100), .part = k});
      if (!pool.ok()) {
        ADD_FAILURE() << pool.status().ToString();
        std::abort();
      }
      co.pool.masters.push_back(pool.value()->address());
      parts_.push_back(std::move(pool).value());
    }
    auto c = client::Client::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }
  ~InProcessPool() { client_.reset(); }
  client::Client& client() { return *client_; }
  embedded::EmbeddedPool& part(uint32_t k) { return *parts_[k]; }
  // Flips a bit of `key`'s value where part k's store holds it: only its checksum can tell.
  void CorruptStoredValue(const std::string& key, uint32_t k = 0) {
    auto value = client_->Get(key);
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    ASSERT_TRUE(store::testing::FlipBitOfStoredValue(parts_[k]->store(), std::as_bytes(std::span(*value))));
  }
  // Flips a bit in every 4 KiB of part k's store: every value it holds goes bad.
  void CorruptStore(uint32_t k = 0) { store::testing::FlipBitsAcrossTheSegment(parts_[k]->store()); }
  // Stops part k's master and store: its keys become unreachable.
  void StopPart(uint32_t k) { parts_[k].reset(); }

 private:
  std::vector<std::unique_ptr<embedded::EmbeddedPool>> parts_;
  std::unique_ptr<client::Client> client_;
};

// The pool an engine test runs against: the real one over gRPC and sockets, or the master's
// core called in this process (no gRPC: what ThreadSanitizer runs, test_local_pool.h).
enum class PoolKind { kGrpc, kLocal };

class EnginePool {
 public:
  EnginePool(PoolKind kind, uint64_t lease_ms, uint64_t memory = 64 << 20, uint32_t parts = 1) {
    if (kind == PoolKind::kLocal) {
      EXPECT_EQ(parts, 1u) << "a local pool has one part";
      local_ = std::make_unique<LocalPoolChunkStore>(memory, lease_ms);
    } else {
      grpc_ = std::make_unique<InProcessPool>(lease_ms, memory, parts);
      grpc_store_ = std::make_unique<PoolChunkStore>(&grpc_->client());
    }
  }
  ChunkStore& store() { return local_ ? static_cast<ChunkStore&>(*local_) : *grpc_store_; }
  // Flips a bit of `key`'s stored value: only its checksum can tell.
  void CorruptStoredValue(const std::string& key) {
    if (local_) {
      local_->CorruptStoredValue(key);
    } else {
      grpc_->CorruptStoredValue(key);
    }
  }
  // The pool over gRPC; null for a local one.
  InProcessPool* grpc() { return grpc_.get(); }

 private:
  std::unique_ptr<InProcessPool> grpc_;
  std::unique_ptr<PoolChunkStore> grpc_store_;
  std::unique_ptr<LocalPoolChunkStore> local_;
};

// Forwards to a real store; `before_read` / `before_put` run first and may block, and
// `after_read` may replace a read's results or change the bytes it read (a corrupt store). While a read hook is set, Map maps nothing, so
// every read passes through the hooks.
class InterposedChunkStore final : public ChunkStore {
 public:
  explicit InterposedChunkStore(ChunkStore* inner) : inner_(inner) {}
  std::function<void(const client::LookupResult&)> before_read;
  std::function<void()> before_put;
  std::function<void(std::span<const size_t>, std::span<const client::ValueBuffer>, std::vector<Result<uint64_t>>&)>
      after_read;

  std::shared_ptr<const client::LookupResult> Lookup(std::span<const std::string> keys) override {
    return inner_->Lookup(keys);
  }
  std::vector<Result<uint64_t>> Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                     std::span<const client::ValueBuffer> buffers, client::ChecksumCheck check) override {
    if (before_read) before_read(lookup);
    auto out = inner_->Read(lookup, indices, buffers, check);
    if (after_read) after_read(indices, buffers, out);
    return out;
  }
  Result<std::vector<bool>> Exists(std::span<const std::string> keys) override { return inner_->Exists(keys); }
  std::vector<Status> Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                          std::span<const std::string> groups) override {
    if (before_put) before_put();
    return inner_->Put(keys, values, groups);
  }
  std::vector<Status> Remove(std::span<const std::string> keys) override { return inner_->Remove(keys); }
  Status RegisterBuffer(void* addr, size_t length) override { return inner_->RegisterBuffer(addr, length); }
  Status UnregisterBuffer(void* addr) override { return inner_->UnregisterBuffer(addr); }
  Result<transfer::MappedRange> Map(const client::LookupResult& lookup, size_t index) override {
    if (before_read || after_read) return Unavailable("read hooks set: reads go through Read");
    return inner_->Map(lookup, index);
  }

 private:
  ChunkStore* inner_;
};

// A deadline for a Wait whose job must finish: only a hung engine reaches it, and the test then
// fails on the outcome's NOT_READY instead of hanging.
inline std::chrono::steady_clock::time_point LongDeadline() {
  return std::chrono::steady_clock::now() + std::chrono::seconds(60);
}

// A gate tests open when they want a blocked worker to go on.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace kvpool::connector::testing
