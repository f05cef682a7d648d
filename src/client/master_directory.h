// MasterDirectory: the stub each of a pool's parts is called through. A part's master is a
// fixed address, or — for a pool elected in etcd — whichever master leads the part's election
// now: after a call failed UNAVAILABLE (a dead leader, or a standby answering), Refresh asks
// etcd again and points the part's stub at the new leader.
//
// Thread-safe. Internal to the client library.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/pool_parts.h"
#include "etcd/part_leader.h"
#include "proto/master.grpc.pb.h"
#include "proto/rpc_credentials.h"

namespace kvpool::client {

class MasterDirectory {
 public:
  using Stub = proto::Master::Stub;

  // Fixed addresses connect lazily. An elected pool waits up to `timeout` until etcd names a
  // leader for every part; UNAVAILABLE/NOT_FOUND (naming the part) if it does not. Every
  // channel brings `credentials` (proto/rpc_security.h).
  static Result<std::unique_ptr<MasterDirectory>> Create(const PoolParts& pool, std::chrono::milliseconds timeout,
                                                         proto::RpcCredentials credentials = {});

  size_t size() const { return parts_.size(); }
  bool follows_leaders() const { return !leaders_.empty(); }
  // Every part's stub now, in part order.
  std::vector<std::shared_ptr<Stub>> Stubs() const;
  std::string Address(uint32_t part) const;

  // Asks etcd who leads `part` now (within `timeout`) and points its stub there. True when the
  // part now has a different master than before. Always false for fixed addresses.
  bool Refresh(uint32_t part, std::chrono::milliseconds timeout);

 private:
  struct Part {
    std::string address;
    std::shared_ptr<Stub> stub;
  };
  MasterDirectory() = default;
  void Point(uint32_t part, const std::string& address);  // REQUIRES: mu_ held

  proto::RpcCredentials credentials_;
  std::vector<std::unique_ptr<etcd::PartLeader>> leaders_;  // one per part when elected
  mutable std::mutex mu_;
  std::vector<Part> parts_;  // guarded by mu_
};

// The channel every master call uses (reconnects within a second, pings dead links).
std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address, const proto::RpcCredentials& credentials);

}  // namespace kvpool::client
