#include "master/master_service.h"

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <vector>

#include "proto/lookup_reply.h"
#include "proto/rpc_security.h"
#include "proto/status_conversion.h"

namespace kvpool::master {

namespace {

// Records per PullIndex answer (well inside the message limit at 4 KiB keys).
constexpr size_t kIndexPollRecords = 16384;

// Records one call's latency when it goes out of scope.
class CallTimer {
 public:
  CallTimer(RpcMetrics* metrics, RpcMethod method, uint64_t keys)
      : metrics_(metrics), method_(method), keys_(keys), start_(std::chrono::steady_clock::now()) {}
  ~CallTimer() {
    auto elapsed = std::chrono::steady_clock::now() - start_;
    metrics_->Record(method_, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count(),
                     keys_);
  }

 private:
  RpcMetrics* metrics_;
  RpcMethod method_;
  uint64_t keys_;
  std::chrono::steady_clock::time_point start_;
};

template <typename Reply>
void SetStatus(const Status& status, Reply* reply) {
  reply->set_code(static_cast<proto::Code>(status.code()));
  if (!status.ok()) reply->set_message(status.message());
}

std::vector<std::string_view> KeyViews(const google::protobuf::RepeatedPtrField<std::string>& keys) {
  std::vector<std::string_view> views;
  views.reserve(keys.size());
  for (const std::string& key : keys) views.emplace_back(key);
  return views;
}

void ToProto(const SegmentInfo& info, proto::SegmentEndpoint* out) {
  out->set_segment_id(info.id);
  out->set_store_id(info.store_id);
  out->set_host_id(info.host_id);
  out->set_tcp_address(info.tcp_address);
  out->set_shm_socket(info.shm_socket);
  out->set_size(info.size);
  out->set_ssd_capacity_bytes(info.ssd_capacity_bytes);
  out->set_ssd_max_value_bytes(info.ssd_max_value_bytes);
}

void ToProto(const std::vector<ReplicaView>& replicas,
             google::protobuf::RepeatedPtrField<proto::Replica>* out) {
  out->Reserve(static_cast<int>(replicas.size()));
  for (const ReplicaView& r : replicas) {
    proto::Replica* replica = out->Add();
    replica->set_segment_id(r.segment_id);
    replica->set_offset(r.offset);
    replica->set_length(r.length);
  }
}

void ToProto(const std::vector<Status>& statuses, proto::BatchKeysReply* reply) {
  reply->mutable_results()->Reserve(static_cast<int>(statuses.size()));
  for (const Status& status : statuses) SetStatus(status, reply->add_results());
}

}  // namespace

grpc::Status MasterService::Admit(const grpc::ServerContext* context, std::optional<TenantClaim>* caller) const {
  auto who = proto::CallerOf(context, secret_, pool_token_);
  if (!who.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        fmt::format("master of part {} {}", identity_.part, who.status().message()));
  }
  *caller = std::move(who).value();
  return grpc::Status::OK;
}

grpc::Status MasterService::PoolOnly(const std::optional<TenantClaim>& caller, std::string_view what) {
  if (!caller) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      fmt::format("tenant '{}' may not {}: that takes the pool's own secret", caller->name, what));
}

grpc::Status MasterService::MayUse(const std::optional<TenantClaim>& caller,
                                   const google::protobuf::RepeatedPtrField<std::string>& keys) {
  if (!caller) return grpc::Status::OK;
  for (const std::string& key : keys) {
    if (!caller->Allows(key)) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          fmt::format("tenant '{}' may not use '{}': its namespace '{}' is not one of its credential's",
                                      caller->name, key.substr(0, 200), NamespaceOf(key).substr(0, 200)));
    }
  }
  return grpc::Status::OK;
}

AccessGrant MasterService::GrantFor(GrantOp op, const ReplicaView& replica, uint64_t length, uint64_t valid_ms) const {
  return IssueGrant(*secret_, op, replica.segment_id, replica.offset, length,
                    WallClockMs() + static_cast<int64_t>(valid_ms));
}

std::shared_ptr<PoolMetadata> MasterService::Serving(const grpc::ServerContext* context, CallKind kind,
                                                     grpc::Status* status, std::optional<TenantClaim>* caller) const {
  if (grpc::Status admitted = Admit(context, caller); !admitted.ok()) {
    *status = admitted;
    return nullptr;
  }
  std::shared_ptr<PoolMetadata> pool = pool_->Get();
  if (!pool) {
    *status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           fmt::format("master {} does not lead part {} now (a standby, or its term ended); "
                                       "ask etcd for the leader",
                                       identity_.master_id, identity_.part));
    return nullptr;
  }
  if (kind != CallKind::kStore && !takeover_gate_.Open()) {
    *status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           fmt::format("master {} has just taken part {} over and its stores are rejoining; "
                                       "retry shortly",
                                       identity_.master_id, identity_.part));
    return nullptr;
  }
  if (kind == CallKind::kClientWork && refuse_new_work_.load()) {
    *status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           fmt::format("master {} is handing part {} over to a standby; ask etcd for the leader",
                                       identity_.master_id, identity_.part));
    return nullptr;
  }
  return pool;
}

grpc::Status MasterService::MountSegment(grpc::ServerContext* context,
                                         const proto::MountSegmentRequest* request,
                                         proto::MountSegmentReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kMountSegment, 1);
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kStore, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = PoolOnly(caller, "mount segments"); !denied.ok()) return denied;
  reply->set_heartbeat_ttl_ms(pool->options().heartbeat_ttl_ms);
  reply->set_max_lease_ms(pool->options().max_lease_ms);
  if (request->part() != identity_.part) {
    SetStatus(InvalidArgument(fmt::format("this store joins part {}, but this master serves part {} (check the "
                                          "store's --part and the pool list)",
                                          request->part(), identity_.part)),
              reply);
    return grpc::Status::OK;
  }
  const proto::SegmentEndpoint& endpoint = request->segment();
  SegmentInfo info;
  info.store_id = endpoint.store_id();
  info.host_id = endpoint.host_id();
  info.tcp_address = endpoint.tcp_address();
  info.shm_socket = endpoint.shm_socket();
  info.size = endpoint.size();
  info.keeps_index = request->keeps_index();
  info.ssd_capacity_bytes = endpoint.ssd_capacity_bytes();
  info.ssd_max_value_bytes = endpoint.ssd_max_value_bytes();
  // A store's SSD tier comes back with it, on a rejoin or a fresh mount (a restarted store).
  const std::span<const proto::IndexEntry* const> entries(request->entries().data(), request->entries_size());
  if (request->rejoin_segment_id() != 0) {
    if (!request->keeps_index()) {
      SetStatus(InvalidArgument("a rejoin needs keeps_index"), reply);
      return grpc::Status::OK;
    }
    info.id = request->rejoin_segment_id();
    auto rejoined = pool->RejoinSegment(std::move(info), entries, request->lease_horizon_unix_ms());
    // Back or refused, what this store held is now decided: clients need not wait for it.
    takeover_gate_.Joined(endpoint.store_id());
    SetStatus(rejoined.status(), reply);
    if (!rejoined.ok()) return grpc::Status::OK;
    const uint64_t from_ssd = pool->TakeSsdObjects(rejoined->info.id, entries);
    reply->set_segment_id(rejoined->info.id);
    reply->set_rebuilt_objects(rejoined->objects + from_ssd);
    spdlog::info("segment {} of store {} rejoined: {} objects back, {} held until the lease "
                 "horizon, {} malformed entries skipped, in {:.3f} s",
                 rejoined->info.id, rejoined->info.store_id, rejoined->objects, rejoined->held,
                 rejoined->skipped, rejoined->seconds);
    return grpc::Status::OK;
  }
  auto mounted = pool->MountSegment(std::move(info));
  takeover_gate_.Joined(endpoint.store_id());
  SetStatus(mounted.status(), reply);
  if (mounted.ok()) {
    reply->set_segment_id(mounted->id);
    reply->set_rebuilt_objects(pool->TakeSsdObjects(mounted->id, entries));
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::PullIndex(grpc::ServerContext* context,
                                      const proto::PullIndexRequest* request,
                                      proto::PullIndexReply* reply) {
  // Not timed with the other calls: it is a long poll, its latency is how long nothing happened.
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kStore, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = PoolOnly(caller, "pull a segment's index"); !denied.ok()) return denied;
  auto segment = pool->FindSegment(request->segment_id());
  if (!segment || !segment->journal()) {
    SetStatus(Stale(fmt::format("segment {} is not mounted here with an index; remount",
                                request->segment_id())),
              reply);
    return grpc::Status::OK;
  }
  // Answer well inside the store's deadline, and at once when the store has gone away.
  auto wait = index_poll_wait_;
  const auto left = context->deadline() - std::chrono::system_clock::now();
  if (left < 2 * wait) wait = std::max(std::chrono::milliseconds(0),
                                       std::chrono::duration_cast<std::chrono::milliseconds>(left / 2));
  // Before the confirmation: a lookup waiting on a PROMOTE must see its failure first.
  pool->ApplyTierReports(request->segment_id(), request->tier_reports());
  segment->journal()->Pull(request->journal_id(), request->acked_seq(), wait, kIndexPollRecords, reply);
  reply->set_code(proto::OK);
  return grpc::Status::OK;
}

grpc::Status MasterService::UnmountSegment(grpc::ServerContext* context,
                                           const proto::UnmountSegmentRequest* request,
                                           proto::UnmountSegmentReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kUnmountSegment, 1);
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kStore, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = PoolOnly(caller, "unmount segments"); !denied.ok()) return denied;
  SetStatus(pool->UnmountSegment(request->segment_id()), reply);
  return grpc::Status::OK;
}

grpc::Status MasterService::Heartbeat(grpc::ServerContext* context, const proto::HeartbeatRequest* request,
                                      proto::HeartbeatReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kHeartbeat, request->segment_ids_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kStore, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = PoolOnly(caller, "heartbeat as a store"); !denied.ok()) return denied;
  if (request->store_id().empty()) {
    SetStatus(InvalidArgument("Heartbeat: store_id is empty"), reply);
    return grpc::Status::OK;
  }
  std::vector<uint64_t> unknown = pool->Heartbeat(
      request->store_id(),
      std::span<const uint64_t>(request->segment_ids().data(), request->segment_ids_size()));
  reply->set_code(proto::OK);
  reply->mutable_unknown_segment_ids()->Add(unknown.begin(), unknown.end());
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchPutStart(grpc::ServerContext* context,
                                          const proto::BatchPutStartRequest* request,
                                          proto::BatchPutStartReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchPutStart, request->items_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kClientWork, &refused, &caller);
  if (!pool) return refused;
  if (caller) {
    google::protobuf::RepeatedPtrField<std::string> names;  // a tenant's groups are its own too
    for (const proto::PutStartItem& item : request->items()) {
      names.Add(std::string(item.key()));
      if (!item.group().empty()) names.Add(std::string(item.group()));
    }
    if (!request->options().group().empty()) names.Add(std::string(request->options().group()));
    if (grpc::Status denied = MayUse(caller, names); !denied.ok()) return denied;
  }
  std::vector<PutStartItem> items;
  items.reserve(request->items_size());
  for (const proto::PutStartItem& item : request->items()) {
    items.push_back({item.key(), item.length(), item.group(), item.checksum()});
  }
  PutOptions options;
  options.replicas = request->options().replicas();
  options.group = request->options().group();
  options.pin_ttl_ms = request->options().pin_ttl_ms();

  BatchPutStartResult started = pool->BatchPutStart(items, options);
  reply->mutable_results()->Reserve(static_cast<int>(started.results.size()));
  for (const PutStartResult& result : started.results) {
    proto::PutStartResult* out = reply->add_results();
    SetStatus(result.status, out);
    ToProto(result.replicas, out->mutable_replicas());
    for (int r = 0; caller && r < out->replicas_size(); ++r) {
      uint8_t wire[AccessGrant::kWireSize];
      EncodeGrant(GrantFor(GrantOp::kWrite, result.replicas[r], result.replicas[r].length,
                           pool->options().put_timeout_ms),
                  wire);
      out->mutable_replicas(r)->set_grant(wire, sizeof(wire));
    }
  }
  for (const SegmentInfo& info : started.segments) ToProto(info, reply->add_segments());
  reply->set_put_timeout_ms(pool->options().put_timeout_ms);
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchPutEnd(grpc::ServerContext* context, const proto::BatchKeysRequest* request,
                                        proto::BatchKeysReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchPutEnd, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kFinish, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  ToProto(pool->BatchPutEnd(KeyViews(request->keys())), reply);
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchPutRevoke(grpc::ServerContext* context,
                                           const proto::BatchKeysRequest* request,
                                           proto::BatchKeysReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchPutRevoke, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kFinish, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  ToProto(pool->BatchPutRevoke(KeyViews(request->keys())), reply);
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchGetReplicas(grpc::ServerContext* context,
                                             const proto::BatchGetReplicasRequest* request,
                                             proto::BatchGetReplicasReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchGetReplicas, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kClientWork, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  BatchGetResult got = pool->BatchGetReplicas(KeyViews(request->keys()), request->lease_ms());
  LookupReplyWriter out(reply, got.results.size());
  for (const GetResult& result : got.results) {
    if (!result.status.ok()) {
      out.Miss(ToProtoCode(result.status.code()), result.status.message(), result.evicted_ms_ago);
      continue;
    }
    if (result.replicas.empty()) {  // never so; the reply form has no hit without a copy
      out.Miss(proto::INTERNAL, "the master found the object but no copy of it");
      continue;
    }
    out.Hit(result.length, result.checksum, static_cast<uint32_t>(result.replicas.size()), result.on_ssd);
    for (const ReplicaView& r : result.replicas) {
      out.Replica(r.segment_id, r.offset);
      if (caller) out.Grant(GrantFor(result.on_ssd ? GrantOp::kReadTier : GrantOp::kRead, r, result.length, got.lease_ms));
    }
  }
  for (const SegmentInfo& info : got.segments) ToProto(info, reply->add_segments());
  reply->set_lease_ms(got.lease_ms);
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchExists(grpc::ServerContext* context, const proto::BatchKeysRequest* request,
                                        proto::BatchExistsReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchExists, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kClientWork, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  pool->BatchExists(KeyViews(request->keys()), reply->mutable_exists());
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchRemove(grpc::ServerContext* context, const proto::BatchKeysRequest* request,
                                        proto::BatchKeysReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchRemove, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kClientWork, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  ToProto(pool->BatchRemove(KeyViews(request->keys())), reply);
  return grpc::Status::OK;
}

grpc::Status MasterService::BatchRetain(grpc::ServerContext* context, const proto::BatchRetainRequest* request,
                                        proto::BatchKeysReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kBatchRetain, request->keys_size());
  grpc::Status refused;
  std::optional<TenantClaim> caller;
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kClientWork, &refused, &caller);
  if (!pool) return refused;
  if (grpc::Status denied = MayUse(caller, request->keys()); !denied.ok()) return denied;
  const uint64_t reuse_in_ms = request->has_reuse_in_ms() ? request->reuse_in_ms() : request->retain_ms();
  ToProto(pool->BatchRetain(KeyViews(request->keys()), request->retain_ms(), reuse_in_ms), reply);
  return grpc::Status::OK;
}

grpc::Status MasterService::Stat(grpc::ServerContext* context, const proto::StatRequest*,
                                 proto::StatReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kStat, 0);
  grpc::Status refused;
  std::optional<TenantClaim> caller;  // tenants too: counters, never keys
  std::shared_ptr<PoolMetadata> pool = Serving(context, CallKind::kStore, &refused, &caller);
  if (!pool) return refused;
  PoolStats stats = pool->Stat();
  reply->set_objects(stats.objects);
  reply->set_used_bytes(stats.used_bytes);
  reply->set_capacity_bytes(stats.capacity_bytes);
  reply->set_evicted_objects(stats.evicted_objects);
  reply->set_evicted_bytes(stats.evicted_bytes);
  reply->set_hits(stats.hits);
  reply->set_misses(stats.misses);
  reply->set_misses_evicted(stats.misses_evicted);
  reply->set_term(pool_->term());
  for (const SegmentStats& s : stats.segments) {
    proto::SegmentStat* out = reply->add_segments();
    ToProto(s.info, out->mutable_segment());
    out->set_used_bytes(s.used_bytes);
    out->set_objects(s.objects);
    out->set_ssd_used_bytes(s.ssd_used_bytes);
    out->set_ssd_objects(s.ssd_objects);
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::Describe(grpc::ServerContext* context, const proto::DescribeRequest*,
                                     proto::DescribeReply* reply) {
  CallTimer timer(metrics_, RpcMethod::kDescribe, 0);
  std::optional<TenantClaim> caller;
  if (grpc::Status admitted = Admit(context, &caller); !admitted.ok()) return admitted;
  reply->set_master_id(identity_.master_id);
  reply->set_part(identity_.part);
  return grpc::Status::OK;
}

}  // namespace kvpool::master
