// MasterService: the gRPC face of PoolMetadata. It translates proto messages to core calls
// and back, and records per-method metrics; all rules live in PoolMetadata.
//
// Every RPC returns gRPC OK; outcomes travel as proto::Code per key (or per reply), so one
// bad key never fails a batch of thousands.
#pragma once

#include "master/pool_metadata.h"
#include "master/rpc_metrics.h"
#include "proto/master.grpc.pb.h"

namespace kvpool::master {

class MasterService final : public proto::Master::Service {
 public:
  // REQUIRES: `pool` and `metrics` outlive the service.
  MasterService(PoolMetadata* pool, RpcMetrics* metrics) : pool_(pool), metrics_(metrics) {}

  grpc::Status MountSegment(grpc::ServerContext*, const proto::MountSegmentRequest*,
                            proto::MountSegmentReply*) override;
  grpc::Status UnmountSegment(grpc::ServerContext*, const proto::UnmountSegmentRequest*,
                              proto::UnmountSegmentReply*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const proto::HeartbeatRequest*,
                         proto::HeartbeatReply*) override;
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
  grpc::Status BatchRemove(grpc::ServerContext*, const proto::BatchKeysRequest*,
                           proto::BatchKeysReply*) override;
  grpc::Status Stat(grpc::ServerContext*, const proto::StatRequest*, proto::StatReply*) override;

 private:
  PoolMetadata* const pool_;
  RpcMetrics* const metrics_;
};

}  // namespace kvpool::master
