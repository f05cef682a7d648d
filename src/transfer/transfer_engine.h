// TransferEngine: moves bytes between this process's memory and storage segments.
//
// Callers describe where a segment lives once (OpenSegment, from the master's replica info)
// and then submit batches of reads/writes (local address, segment id, offset, length). The
// engine picks a transport per segment: shm when the segment is on this host and its store's
// unix socket answers, else tcp. Thread-safe: many threads may submit at once.
//
// Transports plug in behind `Transport` (transport.h); RDMA and CUDA paths add one there.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvpool::transfer {

// Where a segment's bytes can be reached (mirrors proto::SegmentEndpoint).
struct SegmentEndpoint {
  uint64_t segment_id = 0;
  std::string store_id;
  std::string host_id;      // equal to LocalHostId() => same host
  std::string tcp_address;  // "host:port"
  std::string shm_socket;   // unix socket path; empty => no shm
  uint64_t size = 0;
};

enum class OpKind { kRead, kWrite };  // read: segment -> local; write: local -> segment

struct TransferRequest {
  OpKind kind = OpKind::kRead;
  void* local = nullptr;  // REQUIRES: [local, local+length) stays valid until the batch completes
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct TransferOptions {
  int shm_copy_threads = 2;        // threads that split large shm copies
  int tcp_connections_per_peer = 4;
  int tcp_io_threads = 2;
  bool allow_shm = true;           // false forces tcp even on the same host (benchmarks, tests)
  std::chrono::milliseconds connect_timeout{2000};
};

// Identifies this host: same string on every process of one machine (boot id + hostname).
std::string LocalHostId();

// The outcome of one submitted batch. Wait() returns once every request finished or the
// deadline passed; requests not finished by then report TIMEOUT and their buffers may still
// be written to until Wait() returns... REQUIRES: keep the local buffers alive until Wait returns.
class TransferBatch {
 public:
  virtual ~TransferBatch() = default;
  // Blocks until all requests are done or `deadline`. Returns OK iff every request succeeded.
  virtual Status Wait(std::chrono::steady_clock::time_point deadline) = 0;
  // True once every request has a final status (non-blocking).
  virtual bool Done() const = 0;
  // Per-request status, valid after Wait(); index = position in the submitted span.
  virtual const std::vector<Status>& results() const = 0;
};

class TransferEngine {
 public:
  explicit TransferEngine(TransferOptions options = {});
  ~TransferEngine();
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  // Registers memory that transfers will use. shm and tcp accept any memory; transports that
  // need registration (RDMA, CUDA) use this. Registering the same range twice is OK.
  Status RegisterMemory(void* addr, size_t length);
  Status UnregisterMemory(void* addr);

  // Records how to reach a segment. Idempotent; an endpoint change for the same id replaces it.
  Status OpenSegment(const SegmentEndpoint& endpoint);
  // Forgets a segment (its store went away); later requests naming it fail with STALE.
  void CloseSegment(uint64_t segment_id);

  // Starts a batch. Requests naming unknown segments, or outside a segment's size, fail
  // individually with INVALID_ARGUMENT/STALE; the rest proceed.
  std::unique_ptr<TransferBatch> Submit(std::span<const TransferRequest> requests);

  // Submit + Wait.
  Status Transfer(std::span<const TransferRequest> requests,
                  std::chrono::steady_clock::time_point deadline,
                  std::vector<Status>* per_request = nullptr);

  // Which transport a segment currently uses ("shm", "tcp"); for stats and tests.
  std::string TransportFor(uint64_t segment_id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::transfer
