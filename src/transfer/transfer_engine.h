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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/access_grant.h"
#include "common/histogram.h"
#include "common/shared_secret.h"
#include "common/status.h"

namespace kvpool::transfer {

// Where a segment's bytes can be reached (mirrors proto::SegmentEndpoint).
struct SegmentEndpoint {
  uint64_t segment_id = 0;  // what TransferRequests of this process name the segment by
  std::string store_id;
  std::string host_id;      // equal to LocalHostId() => same host
  std::string tcp_address;  // "host:port"
  std::string shm_socket;   // unix socket path; empty => no shm
  uint64_t size = 0;
  // The id its store serves it under, when that differs from segment_id (a client of several
  // pool parts, whose masters number segments independently); 0 => segment_id.
  uint64_t store_segment_id = 0;

  uint64_t served_id() const { return store_segment_id ? store_segment_id : segment_id; }
};

enum class OpKind { kRead, kWrite };  // read: segment -> local; write: local -> segment

struct TransferRequest {
  OpKind kind = OpKind::kRead;
  void* local = nullptr;  // REQUIRES: [local, local+length) stays valid until the batch completes
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  // The master's grant for this range (common/access_grant.h): what a tenant's request must
  // carry; empty for the pool's own secret.
  AccessGrant grant;
  // A read only: receives Checksum() (common/checksum.h) of the bytes read, hashed by the
  // transport as they land, while they are still in cache; written before the request
  // completes OK, and never once its batch is abandoned. Null: not hashed.
  // REQUIRES: length <= kMaxHashedReadBytes (else the request fails INVALID_ARGUMENT).
  uint64_t* checksum = nullptr;
  // A read only: from the segment's store's SSD tier file rather than its memory, `offset`
  // being into that file (the master's lookup says where an object on SSD lies). Same host:
  // read from the file (handed over with the segment) into `local`; otherwise over tcp. The
  // store does not pin the bytes: a caller reading an object must check its checksum.
  bool from_tier = false;
};

// The longest read a transport hashes as it lands (tcp sends such a read as one frame).
inline constexpr uint64_t kMaxHashedReadBytes = uint64_t{64} << 20;

// UCX (ucx_transport.h, README.md "UCX"): a store serves it and a client uses it only when
// enabled, in a build with -DKVPOOL_UCX=ON (UcxBuilt()). Empty strings leave what the
// environment (UCX_TLS, UCX_NET_DEVICES) or UCX's defaults say.
struct UcxSettings {
  bool enabled = false;
  std::string transports;  // UCX_TLS: "rc,sm", "tcp", "sm", ...
  std::string devices;     // UCX_NET_DEVICES: "mlx5_0:1", "eth1", "lo", ...
};
// Whether this build has UCX.
bool UcxBuilt();

struct TransferOptions {
  // Threads that copy one large shm batch, counting the submitting thread (so 2 = the caller
  // plus one pool helper). Batches under 256 KiB are copied by the caller alone.
  int shm_copy_threads = 2;
  // Map shm segments with MAP_POPULATE so copies never take page faults (costs time once,
  // in OpenSegment, proportional to the segment size).
  bool shm_prefault_mapping = true;
  int tcp_connections_per_peer = 4;
  int tcp_io_threads = 2;
  // Requests larger than this are cut into frames of this size, spread over the peer's
  // connections. Clamped to [4 KiB, 64 MiB].
  uint64_t tcp_chunk_bytes = 1 << 20;
  // SO_SNDBUF / SO_RCVBUF of client sockets; 0 leaves the kernel's autotuning.
  int tcp_send_buffer_bytes = 0;
  int tcp_receive_buffer_bytes = 0;
  // A connection with work queued that moves no byte for this long is dropped (its requests
  // fail UNAVAILABLE) and replaced: a hung peer does not hold a connection forever.
  std::chrono::milliseconds tcp_stall_timeout{5000};
  bool allow_shm = true;           // false forces tcp even on the same host (benchmarks, tests)
  // Bounds connecting to a peer (tcp) and the shm handshake with a store's unix socket.
  std::chrono::milliseconds connect_timeout{2000};
  // The pool's secret (--auth-file): proven to every store at connection set-up, and only
  // stores that ask for it are used (auth_handshake.h). None: stores that ask refuse us.
  std::optional<SharedSecret> secret;
  // Reach stores on other hosts that serve UCX over it, one-sided (ucx_transport.h).
  UcxSettings ucx;
};

// Identifies this host: same string on every process of one machine and network namespace
// ("<boot id>/<hostname>/net:[inode]").
// The environment variable KVPOOL_HOST_ID, when set, replaces it (tests simulate other hosts).
std::string LocalHostId();

// The outcome of one submitted batch. Wait() returns once every request finished or the
// deadline passed; a request that did not finish by the deadline reports TIMEOUT (even if it
// completes a moment later: a late read may hold bytes its lease no longer protects).
// After Wait() returns, or the batch is destroyed, the engine never touches the batch's
// local buffers again. REQUIRES: keep the local buffers alive until then.
class TransferBatch {
 public:
  // Abandons unfinished requests like Wait() with a past deadline.
  virtual ~TransferBatch() = default;
  // Blocks until all requests are done or `deadline` (overrunning it by at most one
  // in-progress memcpy chunk or non-blocking syscall). Returns OK iff every request succeeded
  // in time; TIMEOUT if any did not finish in time; else the first failure's status.
  // Calling it again returns the same.
  virtual Status Wait(std::chrono::steady_clock::time_point deadline) = 0;
  // True once every request has a final status (non-blocking).
  virtual bool Done() const = 0;
  // Per-request status, valid after Wait(); index = position in the submitted span.
  virtual const std::vector<Status>& results() const = 0;
};

// A store's segment mapped into this process (same-host shm). Whoever holds it keeps the
// mapping alive, even after the engine closed the segment or the store withdrew it.
class SegmentMapping {
 public:
  virtual ~SegmentMapping() = default;
  virtual std::span<const std::byte> bytes() const = 0;
  // False once the store stopped serving this mapping (it withdrew or remounted the segment):
  // from then on the bytes may be reused for other objects.
  virtual bool served() const = 0;
};

// [offset, offset + length) of a mapped segment, readable in place (no copy).
struct MappedRange {
  std::shared_ptr<const SegmentMapping> mapping;
  const std::byte* data = nullptr;
  uint64_t length = 0;
};

// The sizes of the requests a TransferEngine was given, for its process's /metrics.
struct TransferMetrics {
  Histogram read_bytes{Histogram::kSizeBounds, Histogram::Unit::kBytes};
  Histogram write_bytes{Histogram::kSizeBounds, Histogram::Unit::kBytes};
  // kvpool_transfer_request_bytes{op="read"|"write"} of several engines summed (a process's
  // clients); `labels` as in AppendMetric.
  static void AppendPrometheus(std::span<const TransferMetrics* const> engines, std::string* out,
                               std::string_view labels = {});
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

  // Records how to reach a segment and picks its transport: shm when allowed, the endpoint is
  // on this host and its store's unix socket hands over the segment; else ucx when enabled
  // and the store serves it; otherwise tcp (fails only if there is no usable tcp address).
  // Control path: may block up to connect_timeout (twice with ucx). Idempotent; an endpoint
  // change for the same id, or a route that fell back for good (a ucx endpoint that failed),
  // opens it afresh (in-flight work finishes on the old route).
  Status OpenSegment(const SegmentEndpoint& endpoint);
  // Forgets a segment (its store went away); later requests naming it fail with STALE.
  void CloseSegment(uint64_t segment_id);

  // Starts a batch. Requests naming segments not open (STALE), outside a segment's size or
  // with a null buffer (INVALID_ARGUMENT) fail individually; the rest proceed. Zero-length
  // requests succeed at once. tcp requests are queued and Submit returns at once; shm copies
  // run on the calling thread (with pool helpers for large batches), so for shm Submit
  // returns when the copies are done or nearly so.
  std::unique_ptr<TransferBatch> Submit(std::span<const TransferRequest> requests);

  // Submit + Wait.
  Status Transfer(std::span<const TransferRequest> requests,
                  std::chrono::steady_clock::time_point deadline,
                  std::vector<Status>* per_request = nullptr);

  // Maps [offset, offset + length) of a segment for reading in place, with no copy: shm only.
  // UNAVAILABLE when the segment's transport does not map it (tcp), STALE when it is not open
  // or withdrawn, INVALID_ARGUMENT when out of bounds. Like any read, the bytes are right only
  // while the object's lease holds and mapping->served() stays true: check both after use.
  Result<MappedRange> MapForRead(uint64_t segment_id, uint64_t offset, uint64_t length);

  // Which transport a segment currently uses ("shm", "ucx", "tcp"; "" if not open); for stats
  // and tests. A ucx route whose endpoint failed says "ucx" but moves its bytes over tcp.
  std::string TransportFor(uint64_t segment_id) const;
  // Every valid request submitted so far, by size (atomics: read any time).
  const TransferMetrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::transfer
