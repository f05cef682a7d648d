// StorageService: one process's contribution to the pool. It owns a pre-faulted memory
// segment, serves its bytes through a transfer::SegmentServer (tcp for other hosts, a unix
// socket handing out the memfd for this host), and keeps the segment mounted on the master.
//
// Lifecycle of the segment id (architecture.md, invariant 3):
//   Start     MountSegment -> id A; serve A; heartbeat every heartbeat_interval.
//   index     a second thread pulls the changes to A's index from the master (PullIndex) and
//             applies them to the store's copy (segment_index.h, invariant 8).
//   unknown   a heartbeat reply lists A as unknown (the master restarted, a standby took over,
//             or it dropped us after missed beats): rejoin at once — MountSegment with id A and
//             the index — and keep serving A; the master takes its objects back.
//   dropped   only when the rejoin is refused: withdraw A at once (tcp requests for A now fail
//             STALE), forget the index, then wait max_lease_ms before remounting. Same-host
//             clients copy through their own mapping of the memfd and cannot be refused, so
//             only waiting out every lease the master granted on A guarantees nobody still
//             reads A's bytes when the master places new objects there.
//   remount   MountSegment -> id B; serve B. Repeated every interval until the master answers.
//   Stop      UnmountSegment (best-effort, bounded by rpc_timeout), stop serving.
// A master that stops answering is retried on every beat; the log gets one line when it
// becomes unreachable and one when it is back, not one per beat.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "etcd/store_registry.h"
#include "transfer/transfer_engine.h"
#include "proto/rpc_credentials.h"
#include "store/mount_client.h"
#include "store/segment_index.h"
#include "store/segment_memory.h"
#include "store/tier_mover.h"
#include "transfer/segment_server.h"

namespace kvpool::http {
class MetricsEndpoint;
}

namespace kvpool::store {

struct StorageOptions {
  std::string master_address;  // "host:port" of the master's gRPC service
  // Or etcd endpoints: the master is whichever leads the part's election, followed across
  // failovers (a new leader is rejoined with the index, like a restarted master).
  std::string etcd;
  uint32_t part = 0;           // the pool part it joins: master_address must be that part's master
  uint64_t memory_bytes = 0;   // segment size. REQUIRES: > 0
  std::string tcp_listen = "127.0.0.1:0";  // loopback by default; another host's clients need e.g. 0.0.0.0:0
  // Host that clients use to reach tcp_listen. "" => the listen host, or 127.0.0.1 if that
  // is a wildcard (0.0.0.0 / ::), which only suits single-host pools.
  std::string advertise_host;
  std::string shm_socket_dir = "/tmp";  // the unix socket is <dir>/kvpool-<store_id>.sock
  std::string store_id;                 // "" => random; letters, digits, '-', '_', '.'
  std::chrono::milliseconds heartbeat_interval{1000};
  // The pool's clock (common/clock.h): the heartbeats' timer and the remount's wait run on it.
  // REQUIRES: outlives the service.
  Clock* clock = SteadyClock::Get();
  // Following etcd: how long the store stays in the part's registry after it stops renewing
  // (it dies). A new leader waits for registered stores, so this bounds what a dead one costs.
  std::chrono::seconds registration_ttl{3};
  std::chrono::milliseconds rpc_timeout{3000};
  bool use_huge_pages = true;
  bool lock_memory = false;  // mlock the segment, best-effort
  int io_threads = 2;        // the SegmentServer's tcp threads
  // Serve the segment over UCX too, one-sided (transfer/ucx_segments.h); clients given
  // --transport ucx on other hosts then read and write it without this process's threads.
  transfer::UcxSettings ucx;
  // Keep a copy of the segment's index (invariant 8). Without it the master answers puts
  // without waiting for this store, and a master restart or failover loses its objects.
  bool keep_index = true;
  // A rejoin sends the whole index (1M objects are ~100 MB); it may take this long.
  std::chrono::milliseconds rejoin_timeout{30000};
  // An SSD tier under the segment (issue 17; store/tier_mover.h): the master demotes objects
  // there instead of evicting them. Off when ssd_path is empty; needs keep_index.
  std::string ssd_path;
  uint64_t ssd_bytes = 0;
  uint64_t ssd_max_object_bytes = uint64_t{8} << 20;
  // The index thread makes the SSD moves itself as it applies them, before it confirms them
  // (TierMoverOptions::demote_inline), so a master that waits for the confirmation sees them
  // done (master::MasterOptions::settle_each_pass).
  bool ssd_demote_inline = false;
  // HTTP address of the store's /metrics and /health ("" for none; store/store_metrics_text.h).
  std::string metrics_listen;
  // The pool's secret (proven to the master, and demanded of every client of the segment's
  // tcp and shm sockets) and the master's TLS CA.
  proto::RpcCredentials credentials;
};

class StorageService {
 public:
  // Allocates and pre-faults the segment, starts serving, mounts it on the master.
  // Errors: INVALID_ARGUMENT for bad options; NO_SPACE when the memory cannot be had;
  // UNAVAILABLE when the master does not answer within rpc_timeout; the master's own code
  // when it refuses the segment. Nothing is left running or on disk after an error.
  static Result<std::unique_ptr<StorageService>> Start(const StorageOptions& options);

  // Calls Stop().
  ~StorageService();
  StorageService(const StorageService&) = delete;
  StorageService& operator=(const StorageService&) = delete;

  // The id the master currently knows the segment by; 0 while dropped and not yet remounted,
  // and after Stop().
  uint64_t segment_id() const { return segment_id_.load(); }
  // "host:port" clients use for tcp (the advertised host and the port actually bound).
  std::string tcp_address() const { return tcp_address_; }
  std::string shm_socket_path() const { return shm_socket_path_; }
  const std::string& store_id() const { return store_id_; }
  const SegmentMemory& memory() const { return *memory_; }
  // How many times the segment was remounted after the master dropped it.
  uint64_t remounts() const { return remounts_.load(); }
  // How many times a master that did not know the segment took it back with its index.
  uint64_t rejoins() const { return rejoins_.load(); }
  // Entries in the store's copy of the segment's index.
  size_t indexed_objects() const { return index_.size(); }
  // The store's copy of the segment's index (what a rejoin sends).
  const SegmentIndex& index() const { return index_; }
  // The SSD tier; null without one.
  const TierMover* ssd() const { return ssd_.get(); }
  // The port of /metrics and /health; 0 without metrics_listen.
  int metrics_port() const;

  // Unmounts on the master (best-effort, bounded by rpc_timeout), stops serving and removes
  // the unix socket. Idempotent and thread-safe; returns once everything has stopped.
  void Stop();

 private:
  StorageService(const StorageOptions& options, std::string store_id);

  // Mounts the segment and serves it under the id the master gives.
  Status MountAndServe();
  // Gives segment `id` and its index to a master that does not know it. OK: serving on.
  Status Rejoin(uint64_t id);
  // One tick of the heartbeat timer: a beat, or the remount once it is due.
  void Heartbeat();
  // Pulls and applies the changes to the index while a segment is mounted.
  void IndexLoop();
  // Applies one PullIndex answer's records from `applied` + 1 on, moving SSD objects as they
  // say; returns the last sequence number applied.
  uint64_t ApplyRecords(const proto::PullIndexReply& reply, uint64_t applied);
  // One beat; starts the drop handling when the master no longer knows our segment.
  void Beat(uint64_t id);
  void NoteMasterReachable(bool reachable, const Status& why);

  const StorageOptions options_;
  const std::string store_id_;
  std::string shm_socket_path_;
  std::string tcp_address_;
  proto::SegmentEndpoint endpoint_;  // what we mount; segment_id left 0

  // Declared before server_: the server must stop using the memory before it is unmapped.
  std::unique_ptr<SegmentMemory> memory_;
  std::unique_ptr<TierMover> ssd_;  // reads and writes memory_: declared after it, gone before it
  std::unique_ptr<transfer::SegmentServer> server_;
  std::unique_ptr<MountClient> master_;
  // Following etcd: keeps this store in the part's registry (etcd/store_registry.h), so that a
  // new leader waits for it to rejoin before answering clients.
  std::unique_ptr<etcd::StoreRegistration> registration_;
  std::unique_ptr<http::MetricsEndpoint> metrics_;  // reads the members above: stopped first

  std::atomic<uint64_t> segment_id_{0};
  std::atomic<uint64_t> remounts_{0};
  std::atomic<uint64_t> rejoins_{0};
  SegmentIndex index_;
  // Bumped whenever the master-side journal restarts (a mount or rejoin): the index thread
  // starts over with the new journal instead of acknowledging the old one's numbering.
  std::atomic<uint64_t> mount_generation_{0};

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  // Earliest time (options_.clock's) a dropped segment may be remounted (invariant 3);
  // guarded by mu_.
  int64_t remount_not_before_ns_ = 0;
  std::chrono::milliseconds max_lease_{0};  // from the latest mount; guarded by mu_
  bool master_reachable_ = true;            // for logging state changes; heartbeat timer only

  std::mutex stop_mu_;  // serialises Stop(); held for its whole run
  bool stopped_ = false;  // guarded by stop_mu_
  std::unique_ptr<Timer> heartbeat_;
  std::thread index_thread_;
};

}  // namespace kvpool::store
