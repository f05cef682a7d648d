// MasterService: the gRPC face of PoolMetadata. It translates proto messages to core calls
// and back, and records per-method metrics; all rules live in PoolMetadata.
//
// Every RPC returns gRPC OK; outcomes travel as proto::Code per key (or per reply), so one
// bad key never fails a batch of thousands.
#pragma once

#include <cstdint>
#include <string>

#include "master/pool_metadata.h"
#include "master/rpc_metrics.h"
#include "proto/master.grpc.pb.h"

namespace kvpool::master {

// What a master answers Describe with: which pool part it serves (stores of another part
// are refused) and an id unique to this process.
struct MasterIdentity {
  uint32_t part = 0;
  std::string master_id;
};

class MasterService final : public proto::Master::Service {
 public:
  // REQUIRES: `pool` and `metrics` outlive the service.
  MasterService(PoolMetadata* pool, RpcMetrics* metrics, MasterIdentity identity)
      : pool_(pool), metrics_(metrics), identity_(std::move(identity)) {}

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
  grpc::Status BatchRemove(grpc::ServerContext*, const proto::BatchKeysRequest*,
                           proto::BatchKeysReply*) override;
  grpc::Status Stat(grpc::ServerContext*, const proto::StatRequest*, proto::StatReply*) override;
  grpc::Status Describe(grpc::ServerContext*, const proto::DescribeRequest*, proto::DescribeReply*) override;

 private:
  PoolMetadata* const pool_;
  RpcMetrics* const metrics_;
  const MasterIdentity identity_;
};

}  // namespace kvpool::master
