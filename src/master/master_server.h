// MasterServer: a running master — the gRPC service, the /metrics + /health endpoint and
// the maintenance pass (a timer of the injected Clock) (put timeouts, ended leases, heartbeat expiry, watermark eviction)
// around one PoolMetadata.
//
//   auto server = MasterServer::Start(options);
//   if (!server.ok()) { ... server.status().ToString() ... }
//   (*server)->Wait();
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "master/namespace_quotas.h"
#include "proto/rpc_credentials.h"

namespace grpc {
class Server;
}
namespace kvpool::http {
class MetricsEndpoint;
}

namespace kvpool::master {

class ActivePool;
class Leadership;
class MasterService;
class PoolMetadata;
class RpcMetrics;

struct MasterOptions {
  // Loopback by default: a master other hosts can reach is a choice (--listen 0.0.0.0:50051),
  // best made with --auth-file.
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";  // "" disables /metrics and /health
  uint32_t part = 0;  // the pool part this master serves; stores of another part are refused
  double high_watermark = 0.90;
  double evict_fraction = 0.05;
  // Router hints retain at most this share of the eviction units (PoolOptions).
  double max_retained_fraction = 0.5;
  uint64_t default_lease_ms = 5000, max_lease_ms = 60000, put_timeout_ms = 30000,
           heartbeat_ttl_ms = 5000;
  size_t shards = 16;
  size_t max_key_bytes = 4096;
  uint64_t max_value_bytes = uint64_t{1} << 40;
  int rpc_threads = 0;  // 0 = gRPC's default thread pool sizing
  // How often the maintenance pass runs, in the injected Clock's time (its timer).
  uint64_t maintenance_interval_ms = 50;
  // A pass ends only once every store has confirmed its index journal (bounded by the pool's
  // index_sync_timeout_ms), the SSD moves it asked for included when the stores make them
  // before confirming (store::StorageOptions::ssd_demote_inline): nothing a pass started is
  // left to the timing of other threads. For a pool on an emulated clock (the replay).
  bool settle_each_pass = false;

  // High availability (master/leadership.h): with `etcd` endpoints, this master is one of
  // several for its part and serves only while etcd's election names it leader; "" = a lone
  // master that always serves.
  std::string etcd;
  // The gRPC address etcd names to clients and stores; "" = the bound listen address (which
  // must then not be 0.0.0.0).
  std::string advertise;
  uint64_t leader_ttl_s = 2;  // the leader's etcd lease: a dead leader is replaced this fast
  // A new leader answers only stores until every store registered in etcd has rejoined
  // (master/takeover_gate.h), and at most this long: a store that died with the old leader
  // holds clients up only until its registration expires, this is the bound beyond that.
  uint64_t takeover_grace_ms = 10000;

  // The pool's secret every call must prove, and TLS (proto/rpc_security.h).
  proto::RpcServerSecurity security;
  // A byte quota per namespace: the part of a key before its first '/' (namespace_quotas.h).
  QuotaOptions namespace_quotas;
  // PoolOptions::promote_on_hit: a lookup loads SSD objects back into DRAM instead of sending
  // the client to read them from the tier's file.
  bool promote_on_hit = false;
};

class MasterServer {
 public:
  // Binds both endpoints and starts serving. Fails with a readable Status when a port is
  // taken or an option is out of range.
  // REQUIRES: `clock` outlives the server.
  static Result<std::unique_ptr<MasterServer>> Start(const MasterOptions& options,
                                                     Clock* clock = SteadyClock::Get());

  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  // "host:port" actually bound (a requested port 0 is replaced by the one picked).
  std::string address() const { return address_; }
  // Port of /metrics and /health; 0 when disabled.
  int metrics_port() const;

  // Graceful handover (SIGTERM on a leader): stops taking new work, waits (up to `wait`) until
  // every store confirmed its journal, then resigns, so a standby leads at once and rebuilds
  // everything this master answered. A lone master or a standby just returns.
  void HandOver(std::chrono::milliseconds wait = std::chrono::seconds(2));

  // Stops serving (in-flight RPCs get a short grace period). Idempotent.
  void Shutdown();
  // Blocks until Shutdown has been called and the server has stopped.
  void Wait();

  // The core, for in-process callers (CLI, tests); null while this master does not lead.
  std::shared_ptr<PoolMetadata> pool() const;
  // True while this master serves its part (always, for a lone master).
  bool leading() const { return pool() != nullptr; }
  // With etcd; null for a lone master.
  const Leadership* leadership() const { return leadership_.get(); }

 private:
  MasterServer(const MasterOptions& options, Clock* clock);
  // One pass of the maintenance timer: the active pool's leases, puts, stores and eviction.
  void Maintain();
  // While a new term's takeover gate is closed: lists the stores registered in etcd, for which
  // it waits, and opens it if they have all rejoined (master/takeover_gate.h).
  void CheckTakeover();

  // A fresh pool for a new term (or the lone master's only one).
  std::shared_ptr<PoolMetadata> NewPool() const;

  const MasterOptions options_;
  Clock* const clock_;
  std::atomic<const Leadership*> leadership_view_{nullptr};  // what ActivePool asks; set once
  std::unique_ptr<ActivePool> active_;
  std::unique_ptr<Leadership> leadership_;
  std::unique_ptr<RpcMetrics> metrics_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<http::MetricsEndpoint> http_server_;
  std::string address_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool stopped_ = false;   // guarded by mu_
  std::unique_ptr<Timer> maintenance_;  // guarded by mu_ (its task runs outside it)
  std::shared_ptr<PoolMetadata> served_last_;  // what the previous pass ran on; the task's only
};

}  // namespace kvpool::master
