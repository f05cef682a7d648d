#include "master/master_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>

#include "master/active_pool.h"
#include "common/host_port.h"
#include "etcd/store_registry.h"
#include "http/metrics_endpoint.h"
#include "master/leadership.h"
#include "master/master_service.h"
#include "master/pool_metadata.h"
#include "master/pool_metrics_text.h"
#include "master/rpc_metrics.h"
#include "proto/rpc_security.h"

namespace kvpool::master {

namespace {

// Batches of thousands of keys up to 4 KiB each exceed gRPC's 4 MiB default.
constexpr int kMaxMessageBytes = 256 << 20;

Status ValidateOptions(const MasterOptions& o) {
  if (!(o.high_watermark > 0 && o.high_watermark <= 1)) {
    return InvalidArgument(fmt::format("high_watermark {} must be in (0, 1]", o.high_watermark));
  }
  if (!(o.evict_fraction > 0 && o.evict_fraction <= 1)) {
    return InvalidArgument(fmt::format("evict_fraction {} must be in (0, 1]", o.evict_fraction));
  }
  if (!(o.max_retained_fraction >= 0 && o.max_retained_fraction <= 1)) {
    return InvalidArgument(fmt::format("max_retained_fraction {} must be in [0, 1]", o.max_retained_fraction));
  }
  if (o.maintenance_interval_ms == 0) return InvalidArgument("maintenance_interval_ms must be > 0");
  if (o.max_lease_ms == 0 || o.default_lease_ms == 0 || o.default_lease_ms > o.max_lease_ms) {
    return InvalidArgument(fmt::format("leases need 0 < default_lease_ms ({}) <= max_lease_ms ({})",
                                       o.default_lease_ms, o.max_lease_ms));
  }
  if (o.put_timeout_ms == 0 || o.heartbeat_ttl_ms == 0) {
    return InvalidArgument("put_timeout_ms and heartbeat_ttl_ms must be positive");
  }
  if (o.shards == 0 || o.max_key_bytes == 0) {
    return InvalidArgument("shards and max_key_bytes must be positive");
  }
  if (!o.etcd.empty() && (o.leader_ttl_s < 2 || o.leader_ttl_s > 600)) {
    return InvalidArgument(fmt::format("leader_ttl_s {} must be from 2 to 600 (etcd's shortest lease is about 2 s)",
                                       o.leader_ttl_s));
  }
  return Status::Ok();
}

PoolOptions PoolOptionsFrom(const MasterOptions& o) {
  PoolOptions p;
  p.high_watermark = o.high_watermark;
  p.evict_fraction = o.evict_fraction;
  p.max_retained_fraction = o.max_retained_fraction;
  p.default_lease_ms = o.default_lease_ms;
  p.max_lease_ms = o.max_lease_ms;
  p.put_timeout_ms = o.put_timeout_ms;
  p.heartbeat_ttl_ms = o.heartbeat_ttl_ms;
  p.shards = o.shards;
  p.max_key_bytes = o.max_key_bytes;
  p.max_value_bytes = o.max_value_bytes;
  p.quotas = o.namespace_quotas;
  p.promote_on_hit = o.promote_on_hit;
  return p;
}

// 64 random bits in hex: tells two masters apart even behind different addresses.
std::string NewMasterId() {
  std::random_device random;
  return fmt::format("{:08x}{:08x}", random(), random());
}

}  // namespace

MasterServer::MasterServer(const MasterOptions& options, Clock* clock)
    : options_(options),
      clock_(clock),
      active_(options.etcd.empty() ? std::make_unique<ActivePool>()
                                   : std::make_unique<ActivePool>([this] {
                                       const Leadership* l = leadership_view_.load();
                                       return l != nullptr && l->leading();
                                     })),
      metrics_(std::make_unique<RpcMetrics>()),
      service_(std::make_unique<MasterService>(active_.get(), metrics_.get(),
                                               MasterIdentity{options.part, NewMasterId()},
                                               options.security.secret)) {
  if (options.etcd.empty()) active_->Set(NewPool());
}

std::shared_ptr<PoolMetadata> MasterServer::NewPool() const {
  return std::make_shared<PoolMetadata>(PoolOptionsFrom(options_), clock_);
}

std::shared_ptr<PoolMetadata> MasterServer::pool() const { return active_->Get(); }

Result<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterOptions& options,
                                                          Clock* clock) {
  KVPOOL_RETURN_IF_ERROR(ValidateOptions(options));
  std::string host;
  uint16_t requested_port = 0;
  KVPOOL_RETURN_IF_ERROR(SplitHostPort(options.listen, &host, &requested_port));

  auto credentials = proto::ServerCredentialsFor(options.security);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<MasterServer> server(new MasterServer(options, clock));

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(options.listen, *credentials, &bound_port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC turns SO_REUSEPORT on by default, which would let a second master silently share
  // the port with the first. One master per address.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping every few seconds to notice a dead link (client/client.cc); gRPC's default
  // would answer such pings with GOAWAY "too many pings".
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  if (options.rpc_threads > 0) {
    grpc::ResourceQuota quota("kvpool-master");
    quota.SetMaxThreads(options.rpc_threads);
    builder.SetResourceQuota(quota);
  }
  server->grpc_server_ = builder.BuildAndStart();
  if (!server->grpc_server_ || bound_port == 0) {
    return Unavailable(fmt::format(
        "cannot listen for gRPC on {}: the port is already in use or the address is invalid",
        options.listen));
  }
  server->address_ = fmt::format("{}:{}", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                                 bound_port);

  if (!options.etcd.empty()) {
    LeadershipOptions leadership;
    leadership.etcd = options.etcd;
    leadership.part = options.part;
    leadership.advertise = options.advertise.empty() ? server->address_ : options.advertise;
    leadership.ttl = std::chrono::seconds(options.leader_ttl_s);
    MasterServer* s = server.get();
    auto started = Leadership::Start(
        leadership, {.elected =
                         [s](int64_t term) {
                           s->service_->takeover_gate().Close(std::chrono::steady_clock::now() +
                                                              std::chrono::milliseconds(s->options_.takeover_grace_ms));
                           s->active_->Set(s->NewPool(), term);
                           std::lock_guard lock(s->mu_);  // lists the registered stores at once
                           if (s->maintenance_) s->maintenance_->RunSoon();
                         },
                     .deposed = [s](int64_t) { s->active_->Set(nullptr); }});
    if (!started.ok()) {
      server->grpc_server_->Shutdown();
      return started.status();
    }
    server->leadership_ = *std::move(started);
    server->leadership_view_.store(server->leadership_.get());
  }

  if (!options.metrics_listen.empty()) {
    MasterServer* s = server.get();
    auto http = http::MetricsEndpoint::StartMetricsAndHealth(
        options.metrics_listen,
        [s](std::string* body) {
          const std::shared_ptr<PoolMetadata> pool = s->pool();
          // A standby serves no pool: its pool figures are zero.
          AppendPoolMetrics(pool ? pool->Stat() : PoolStats{}, s->options_.part, body);
          if (const Leadership* l = s->leadership_.get()) {
            AppendLeadershipMetrics({pool != nullptr, l->term(), l->elections_won(), l->failovers()}, body);
          } else {
            AppendLeadershipMetrics({true, 0, 0, 0}, body);
          }
          s->metrics_->AppendPrometheus(body);
        },
        [s] { return std::string(s->pool() ? "ok\n" : "ok (standby)\n"); });
    if (!http.ok()) {
      server->grpc_server_->Shutdown();
      return http.status();
    }
    server->http_server_ = std::move(http).value();
  }

  std::lock_guard lock(server->mu_);
  server->maintenance_ = clock->Every(std::chrono::milliseconds(options.maintenance_interval_ms),
                                      [s = server.get()] { s->Maintain(); });
  return server;
}

MasterServer::~MasterServer() {
  Shutdown();
  Wait();
}

int MasterServer::metrics_port() const { return http_server_ ? http_server_->port() : 0; }

void MasterServer::Maintain() {
  std::shared_ptr<PoolMetadata> pool = active_->Get();
  if (pool) {
    // The same pool served again after a gap: the stores' heartbeats were refused meanwhile.
    if (pool != served_last_) pool->ForgiveStoreSilence();
    pool->RunMaintenance();
    if (options_.settle_each_pass) {
      (void)pool->WaitIndexSynced(std::chrono::steady_clock::now() + std::chrono::milliseconds(pool->options().index_sync_timeout_ms));
    }
    CheckTakeover();
  }
  served_last_ = std::move(pool);
}

void MasterServer::CheckTakeover() {
  TakeoverGate& gate = service_->takeover_gate();
  if (!leadership_ || !gate.closed()) return;
  // Listed again on every pass while closed: a store that died drops out when its lease ends.
  auto stores = etcd::RegisteredStores(leadership_->etcd(), options_.part, std::chrono::milliseconds(500));
  if (stores.ok()) gate.Expect(*std::move(stores));
  (void)gate.Open();
}

void MasterServer::HandOver(std::chrono::milliseconds wait) {
  std::shared_ptr<PoolMetadata> pool = active_->Get();
  if (!leadership_ || !pool) return;
  service_->RefuseNewWork();
  const bool synced = pool->WaitIndexSynced(std::chrono::steady_clock::now() + wait);
  spdlog::info("master of part {}: handing over{}", options_.part,
               synced ? " (every store holds its index)" : "; some store did not confirm its index in time");
  (void)leadership_->Resign();
}

void MasterServer::Shutdown() {
  std::unique_ptr<Timer> maintenance;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    maintenance = std::move(maintenance_);
  }
  maintenance.reset();  // waits for a pass in progress
  // Revokes the lease: a standby leads at once instead of after the lease's ttl.
  if (leadership_) (void)leadership_->Resign();
  if (http_server_) http_server_->Shutdown();
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
}

void MasterServer::Wait() {
  {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [this] { return stopped_; });
  }
  if (grpc_server_) grpc_server_->Wait();
}

}  // namespace kvpool::master
