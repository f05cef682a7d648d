// Conversions between kvpool::Status and what crosses the control-plane wire
// (proto::Code per key, grpc::Status per call), with messages a user can act on.
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/master.pb.h"

namespace kvpool {

// Status for a per-key result. `key` names the object in messages that lack one.
Status FromProtoCode(proto::Code code, const std::string& message, std::string_view key);

proto::Code ToProtoCode(StatusCode code);

// Status for a failed gRPC call `method` to the master at `address`: an unreachable master
// reads "UNAVAILABLE: master at HOST:PORT unreachable (BatchGetReplicas): ...".
Status FromGrpcStatus(const grpc::Status& status, std::string_view method, std::string_view address);

}  // namespace kvpool
