// ChunkStore: the few pool operations the connector needs, behind an interface so tests can
// slow down or fail one request's reads without mocking the connector's own logic.
// PoolChunkStore forwards to a client::Client (the real pool).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/status.h"

namespace kvpool::connector {

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;
  // One master round trip: finds `keys` and takes read leases on the ones found.
  virtual std::shared_ptr<const client::LookupResult> Lookup(std::span<const std::string> keys) = 0;
  // Reads lookup entries `indices` into `buffers` (client::Client::ReadLookedUp, which says
  // who checks the checksums).
  virtual std::vector<Result<uint64_t>> Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                             std::span<const client::ValueBuffer> buffers,
                                             client::ChecksumCheck check) = 0;
  virtual Result<std::vector<bool>> Exists(std::span<const std::string> keys) = 0;
  // Puts keys[i] in eviction group groups[i]. One result per key.
  virtual std::vector<Status> Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                                  std::span<const std::string> groups) = 0;
  // Removes keys (a restore drops an object whose bytes do not match their checksum, so that
  // the next save puts it again instead of finding it present). One result per key.
  virtual std::vector<Status> Remove(std::span<const std::string> keys) = 0;
  virtual Status RegisterBuffer(void* addr, size_t length) = 0;
  virtual Status UnregisterBuffer(void* addr) = 0;
  // Lookup entry `index` mapped in place from a same-host replica (client::Client::MapLookedUp);
  // UNAVAILABLE when it can only be read with Read. Stores that inject faults keep this
  // default so every read goes through Read.
  virtual Result<transfer::MappedRange> Map(const client::LookupResult& lookup, size_t index) {
    return Unavailable("this chunk store maps nothing");
  }
  // A router's hints (client::Client::Retain / Release): keep these keys over others for
  // `ttl`, expected to be read again in `reuse_in`, or make them first to evict. Stores that
  // take no hints answer UNAVAILABLE.
  virtual std::vector<Status> Retain(std::span<const std::string> keys, std::chrono::milliseconds ttl,
                                     std::chrono::milliseconds reuse_in) {
    return std::vector<Status>(keys.size(), Unavailable("this chunk store takes no hints"));
  }
  virtual std::vector<Status> Release(std::span<const std::string> keys) {
    return std::vector<Status>(keys.size(), Unavailable("this chunk store takes no hints"));
  }
};

// REQUIRES: `client` outlives the store.
class PoolChunkStore final : public ChunkStore {
 public:
  explicit PoolChunkStore(client::Client* client) : client_(client) {}
  std::shared_ptr<const client::LookupResult> Lookup(std::span<const std::string> keys) override;
  std::vector<Result<uint64_t>> Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                     std::span<const client::ValueBuffer> buffers, client::ChecksumCheck check) override;
  Result<std::vector<bool>> Exists(std::span<const std::string> keys) override;
  // One BatchPut (one master round trip) with a group per key.
  std::vector<Status> Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                          std::span<const std::string> groups) override;
  std::vector<Status> Remove(std::span<const std::string> keys) override { return client_->BatchRemove(keys); }
  Status RegisterBuffer(void* addr, size_t length) override { return client_->RegisterBuffer(addr, length); }
  Status UnregisterBuffer(void* addr) override { return client_->UnregisterBuffer(addr); }
  Result<transfer::MappedRange> Map(const client::LookupResult& lookup, size_t index) override;
  std::vector<Status> Retain(std::span<const std::string> keys, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds reuse_in) override {
    return client_->Retain(keys, ttl, reuse_in);
  }
  std::vector<Status> Release(std::span<const std::string> keys) override { return client_->Release(keys); }

 private:
  client::Client* client_;
};

}  // namespace kvpool::connector
