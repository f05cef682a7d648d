// kvpool client library: put, get, exists and remove objects in the pool.
//
// A Client talks to the masters for *where* and to storage services through the transfer
// engine for the bytes (shm on the same host, tcp otherwise). The pool may be split into parts
// (pool_parts.h), each with its own master: a call sends one batched gRPC round trip to every
// part that holds one of its keys, all in flight at once, so asking four parts costs about
// what asking one does. Every call has a deadline; a store that dies mid-read or a part whose
// master cannot be reached becomes an error for the keys they hold, never a hang. Thread-safe:
// one Client may be shared by many threads.
//
// Checksums: every value put carries its writer's checksum (common/checksum.h, computed here
// before the put starts), and every read checks the bytes it read against it before
// answering (the transport hashes them as they land, while still in cache): a mismatch is
// tried on the object's next copy, else CORRUPT — never wrong bytes.
//
// Zero copy: Put/BatchPut write straight from the caller's memory and GetInto/BatchGetInto
// read straight into it. Buffers used repeatedly should be registered (RegisterBuffer) so
// transports that need registration (RDMA, CUDA) can use them; shm and tcp accept any memory.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/pool_parts.h"
#include "common/status.h"
#include "proto/rpc_credentials.h"
#include "transfer/transfer_engine.h"

namespace kvpool::client {

struct ClientOptions {
  PoolParts pool = PoolParts::Single("127.0.0.1:50051");
  std::chrono::milliseconds rpc_timeout{5000};        // each master call (the parts of one call run concurrently)
  std::chrono::milliseconds transfer_timeout{30000};  // moving one batch's bytes (also bounded by lease / put timeout)
  uint32_t replicas = 1;                              // default copies per object
  // false: Connect fails unless every part's master answers. true: it needs one, and a part
  // that did not answer is asked again on every call (for tools that show a degraded pool).
  bool allow_unreachable_parts = false;
  std::chrono::milliseconds lease{0};                 // read lease to ask for; 0 => the master's default
  // Threads that hash one read's values longer than transfer::kMaxHashedReadBytes (shorter
  // ones are hashed by the transport as they land), counting the reading thread: a core
  // hashes values from memory at ~8-15 GB/s, so a fast read needs several.
  int checksum_threads = 4;
  // The pool's secret (--auth-file), proven to every master and store, and the masters' TLS CA
  // (--tls-ca). The secret replaces transfer.secret.
  proto::RpcCredentials credentials;
  transfer::TransferOptions transfer;
};

struct PutOptions {
  uint32_t replicas = 0;               // 0 => ClientOptions::replicas
  std::string group = {};              // objects of one group are evicted together
  std::chrono::milliseconds pin_ttl{0};  // > 0: soft pin, evicted after unpinned objects until it expires
};

// A read-only view of a value to put.
using ValueView = std::span<const std::byte>;
// A writable buffer to read a value into.
using ValueBuffer = std::span<std::byte>;

// Who checks the values a read brought in against their checksums.
enum class ChecksumCheck {
  // The read: the transport hashes each value as it lands; one that does not match is tried
  // on its next copy, else CORRUPT.
  kBeforeAnswer,
  // No check: what benchmarks measure the check's cost against, and tests whose bad bytes
  // must reach a later check. Never in service.
  kNone,
};

// The result of BatchLookup: where each found key's bytes are, under a read lease that holds
// until `lease_deadline`. Reads through ReadLookedUp must finish before then or they fail.
class LookupResult {
 public:
  LookupResult() = default;
  // Lengths (or why a key cannot be read) and checksums with no replicas: for a
  // connector::ChunkStore that finds objects without a Client (the connector's tests of a pool
  // with no gRPC in the path). A Client reads nothing through such a result.
  LookupResult(std::vector<Result<uint64_t>> lengths, std::vector<uint64_t> checksums,
               std::chrono::steady_clock::time_point lease_deadline)
      : lengths_(std::move(lengths)),
        checksums_(std::move(checksums)),
        replicas_(lengths_.size()),
        lease_deadline_(lease_deadline) {}

  size_t size() const { return lengths_.size(); }
  // The value's length, or why the key cannot be read (NOT_FOUND, NOT_READY, ...).
  const Result<uint64_t>& length(size_t index) const { return lengths_[index]; }
  // The writer's checksum of a found key's value (common/checksum.h). ReadLookedUp checks it;
  // a reader of mapped bytes (MapLookedUp) must check it itself.
  uint64_t checksum(size_t index) const { return checksums_[index]; }
  // A found key whose value is read from its store's SSD tier (the master did not load it
  // back into DRAM): ReadLookedUp reads it from the tier's file; MapLookedUp cannot map it.
  bool on_ssd(size_t index) const { return !replicas_[index].empty() && replicas_[index].front().on_ssd; }
  std::chrono::steady_clock::time_point lease_deadline() const { return lease_deadline_; }
  // A key NOT_FOUND that its master evicted: how long before the lookup, in ms; 0 when the
  // master has no record of it (never stored, removed, or evicted longer ago than it remembers).
  uint64_t evicted_ms_ago(size_t index) const { return index < evicted_ms_ago_.size() ? evicted_ms_ago_[index] : 0; }

 private:
  friend class Client;
  struct Replica {
    uint64_t segment_id, offset;
    AccessGrant grant;  // a tenant's read grant (common/access_grant.h); empty for the pool's secret
    bool on_ssd = false;  // in its store's SSD tier: offset is into the tier's file (a tier read)
  };
  std::vector<Result<uint64_t>> lengths_;
  std::vector<uint64_t> checksums_;
  std::vector<std::vector<Replica>> replicas_;  // preferred (same-host) first
  std::vector<uint64_t> evicted_ms_ago_;        // empty while no key missed was evicted
  std::chrono::steady_clock::time_point lease_deadline_;
};

struct PoolCounters {
  uint64_t objects = 0;
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t misses_evicted = 0;  // of the misses, keys the master remembers evicting
  void Add(const PoolCounters& other);
};

// One part as its master reports it; `status` is why it could not be asked.
struct PartStats : PoolCounters {
  uint32_t part = 0;
  std::string master_address;
  int64_t term = 0;  // the leader's term in etcd; 0 for a master without --etcd
  Status status;
};

// Counters summed over the parts that answered.
struct PoolStats : PoolCounters {
  struct Segment {
    uint32_t part = 0;
    uint64_t id = 0;  // the part's own segment id
    std::string store_id, host_id, tcp_address;
    uint64_t size = 0, used_bytes = 0, objects = 0;
    uint64_t ssd_capacity_bytes = 0, ssd_used_bytes = 0, ssd_objects = 0;  // its store's SSD tier (0: none)
    std::string transport;  // how this client reaches it: "shm", "ucx", "tcp" ("" if it cannot)
  };
  std::vector<Segment> segments;
  std::vector<PartStats> parts;  // one per part, in part order
  size_t unreachable_parts() const;
};

class Client {
 public:
  // Connects to every part's master and checks, within rpc_timeout, that each answers, that
  // it serves the part it is listed as, and that no two parts are one master.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Stores `value` under `key`. Objects are immutable: an existing key gives ALREADY_EXISTS.
  Status Put(std::string_view key, ValueView value, const PutOptions& options = {});
  // One result per key, in order, in one master round trip. REQUIRES: keys.size() ==
  // values.size(). `groups`, when not empty, gives each key its own eviction group (one per
  // key; "" => options.group).
  std::vector<Status> BatchPut(std::span<const std::string> keys, std::span<const ValueView> values,
                               const PutOptions& options = {}, std::span<const std::string> groups = {});

  // Returns a copy of the value. Every read, here and below, gives CORRUPT when no copy of
  // the value matches its checksum.
  Result<std::string> Get(std::string_view key);
  // Reads the value into `buffer`; returns its length. A buffer smaller than the value gives
  // INVALID_ARGUMENT and leaves the object in the pool.
  Result<uint64_t> GetInto(std::string_view key, ValueBuffer buffer);
  // One result per key, in order. REQUIRES: keys.size() == buffers.size().
  std::vector<Result<uint64_t>> BatchGetInto(std::span<const std::string> keys, std::span<const ValueBuffer> buffers);

  // Lookup without reading: one master round trip that finds every key and takes read leases
  // on the found ones, so a caller can decide what to read (e.g. the longest prefix every
  // pipeline stage holds) and then read it with ReadLookedUp, with no second round trip.
  LookupResult BatchLookup(std::span<const std::string> keys);
  // Reads lookup entries `indices` into `buffers` (one per index). A buffer smaller than its
  // value gives INVALID_ARGUMENT; a read finishing after the lease deadline gives TIMEOUT.
  // Values on SSD are read from the tier's file and always checked against their checksum,
  // even with ChecksumCheck::kNone: the store does not pin them (CORRUPT if their slot was
  // reused meanwhile), so no lease bounds their reads either, only transfer_timeout.
  std::vector<Result<uint64_t>> ReadLookedUp(const LookupResult& lookup, std::span<const size_t> indices,
                                             std::span<const ValueBuffer> buffers,
                                             ChecksumCheck check = ChecksumCheck::kBeforeAnswer);

  // Zero copy on the same host: lookup entry `index`'s bytes, mapped in place from a same-host
  // replica's segment (transfer::TransferEngine::MapForRead). UNAVAILABLE when no replica is
  // on this host or the value is on SSD (read it with ReadLookedUp instead), TIMEOUT once the
  // lease has ended.
  // REQUIRES: the caller uses the bytes only while the lease holds, checks both
  // `lookup.lease_deadline()` and `mapping->served()` after it is done with them — a consumer
  // that finishes later must discard what it read — and discards them unless their checksum
  // is `lookup.checksum(index)`.
  Result<transfer::MappedRange> MapLookedUp(const LookupResult& lookup, size_t index);

  Result<bool> Exists(std::string_view key);
  // One round trip for any number of keys.
  Result<std::vector<bool>> BatchExists(std::span<const std::string> keys);

  Status Remove(std::string_view key);
  std::vector<Status> BatchRemove(std::span<const std::string> keys);

  // Hints from a router (issue 18), one round trip per part. Retain keeps each key's eviction
  // unit (its group, or itself) over units without a pin for `ttl` (> 0): a session waiting for
  // a tool or a subagent keeps its history through other sessions' churn. `reuse_in` says when
  // the router expects the keys read again (0: a turn that is queued; absent: at the ttl's
  // end): among retained units the one expected last is evicted first. Release makes them
  // first to evict (a session that ended). Advisory: a pool retains at most a share of its
  // units (beyond it a retention expected sooner takes the place of the one expected last,
  // else NO_SPACE) and evicts retained ones when nothing else is left; a key not in DRAM is
  // OK and unchanged.
  std::vector<Status> Retain(std::span<const std::string> keys, std::chrono::milliseconds ttl,
                             std::optional<std::chrono::milliseconds> reuse_in = std::nullopt);
  std::vector<Status> Release(std::span<const std::string> keys);

  // Reads that found bytes not matching their checksum, since Connect (each one a miss, or a
  // read from the next copy). Mapped reads are counted by their consumer.
  uint64_t checksum_mismatches() const;

  // Every part's counters and segments. Fails only when no part answers; a part that does
  // not is listed with its error (PartStats::status) and left out of the totals.
  Result<PoolStats> Stat();
  const PoolParts& pool() const;

  Status RegisterBuffer(void* addr, size_t length);
  Status UnregisterBuffer(void* addr);

  // The transfer engine, for tests and stats (e.g. which transport a segment uses).
  transfer::TransferEngine& transfer_engine();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::client
