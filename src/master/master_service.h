// MasterService: the gRPC face of PoolMetadata. It translates proto messages to core calls
// and back, and records per-method metrics; all rules live in PoolMetadata.
//
// Every RPC returns gRPC OK; outcomes travel as proto::Code per key (or per reply), so one
// bad key never fails a batch of thousands. The one exception: a master that does not lead
// its part (a standby, or a leader handing over) answers gRPC UNAVAILABLE, which clients and
// stores that follow the leader through etcd take as "ask etcd again and retry".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/access_grant.h"
#include "common/shared_secret.h"
#include "master/active_pool.h"
#include "master/pool_metadata.h"
#include "master/rpc_metrics.h"
#include "master/takeover_gate.h"
#include "proto/master.grpc.pb.h"
#include "proto/rpc_security.h"

namespace kvpool::master {

// What a master answers Describe with: which pool part it serves (stores of another part
// are refused) and an id unique to this process.
struct MasterIdentity {
  uint32_t part = 0;
  std::string master_id;
};

class MasterService final : public proto::Master::Service {
 public:
  // How long a store's PullIndex waits for records before an empty answer (a long poll; also
  // bounded by half the time left to the call's deadline).
  static constexpr std::chrono::milliseconds kIndexPollWait{500};

  // REQUIRES: `pool` and `metrics` outlive the service. `secret`: the pool's; every call must
  // prove it, or a tenant's key derived from it (proto/rpc_security.h); none answers anyone.
  // `index_poll_wait`: kIndexPollWait but in tests and the fuzzer, which call the handlers
  // without a deadline.
  MasterService(const ActivePool* pool, RpcMetrics* metrics, MasterIdentity identity,
                std::optional<SharedSecret> secret = std::nullopt,
                std::chrono::milliseconds index_poll_wait = kIndexPollWait)
      : pool_(pool),
        metrics_(metrics),
        identity_(std::move(identity)),
        secret_(std::move(secret)),
        pool_token_(secret_ ? proto::RpcToken(*secret_) : std::string()),
        index_poll_wait_(index_poll_wait),
        takeover_gate_("master of part " + std::to_string(identity_.part)) {}

  // A leader handing over: refuse new client work (puts, reads, removals) while the stores
  // catch up with their journals; puts already started may still end.
  void RefuseNewWork() { refuse_new_work_.store(true); }
  // A new term answers stores only until they have rejoined (takeover_gate.h).
  TakeoverGate& takeover_gate() { return takeover_gate_; }

  grpc::Status MountSegment(grpc::ServerContext*, const proto::MountSegmentRequest*,
                            proto::MountSegmentReply*) override;
  grpc::Status UnmountSegment(grpc::ServerContext*, const proto::UnmountSegmentRequest*,
                              proto::UnmountSegmentReply*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest*,
                         proto::HeartbeatReply*) override;
  grpc::Status PullIndex(grpc::ServerContext*, const proto::PullIndexRequest*,
                         proto::PullIndexReply*) override;
  grpc::Status BatchPutStart(grpc::ServerContext*, const proto::BatchPutStartRequest*,
                             proto::BatchPutStartReply*) override;
  grpc::Status BatchPutEnd(grpc::ServerContext*, const proto::BatchKeysRequest*,
                           proto::BatchKeysReply*) override;
  grpc::Status BatchPutRevoke(grpc::ServerContext*, const proto::BatchKeysRequest*,
                              proto::BatchKeysReply*) override;
  grpc::Status BatchGetReplicas(grpc::ServerContext*, const proto::BatchGetReplicasRequest*,
                                proto::BatchGetReplicasReply*) override;
  grpc::Status BatchExists(grpc::ServerContext*, const proto::BatchKeysRequest*,
                           proto::BatchExistsReply*) override;
  grpc::Status BatchRetain(grpc::ServerContext*, const proto::BatchRetainRequest*, proto::BatchKeysReply*) override;
  grpc::Status BatchRemove(grpc::ServerContext*, const proto::BatchKeysRequest*,
                           proto::BatchKeysReply*) override;
  grpc::Status Stat(grpc::ServerContext*, const proto::StatRequest*, proto::StatReply*) override;
  grpc::Status Describe(grpc::ServerContext*, const proto::DescribeRequest*, proto::DescribeReply*) override;

 private:
  enum class CallKind {
    kStore,       // from a store (mount, index, heartbeat), or Stat: served while leading
    kFinish,      // ends what a client started (PutEnd, PutRevoke): also while handing over
    kClientWork,  // new client work: neither while handing over nor while stores rejoin
  };
  // The pool to serve a call with; null (and `*status` set) when the caller did not prove the
  // pool's secret or a tenant's key (UNAUTHENTICATED), this master does not lead or the call
  // must wait (see CallKind). `*caller`: the tenant that called, none for the pool's secret.
  std::shared_ptr<PoolMetadata> Serving(const grpc::ServerContext* context, CallKind kind, grpc::Status* status,
                                        std::optional<TenantClaim>* caller) const;
  // UNAUTHENTICATED unless the call proves the pool's secret or a tenant's key.
  grpc::Status Admit(const grpc::ServerContext* context, std::optional<TenantClaim>* caller) const;
  // PERMISSION_DENIED for a tenant: what stores do (mount, heartbeat, index) is the pool's own.
  static grpc::Status PoolOnly(const std::optional<TenantClaim>& caller, std::string_view what);
  // PERMISSION_DENIED when a tenant names a key or group outside its namespaces.
  static grpc::Status MayUse(const std::optional<TenantClaim>& caller,
                             const google::protobuf::RepeatedPtrField<std::string>& keys);
  // To a tenant, a grant for every replica of `replicas` (common/access_grant.h).
  AccessGrant GrantFor(GrantOp op, const ReplicaView& replica, uint64_t length, uint64_t valid_ms) const;

  const ActivePool* const pool_;
  std::atomic<bool> refuse_new_work_{false};
  RpcMetrics* const metrics_;
  const MasterIdentity identity_;
  const std::optional<SharedSecret> secret_;
  const std::string pool_token_;  // RpcToken of secret_
  const std::chrono::milliseconds index_poll_wait_;
  mutable TakeoverGate takeover_gate_;  // opened by the first client call that may pass (Serving)
};

}  // namespace kvpool::master
