// Which master leads a pool part, as etcd's election says.
//
// Every master of part K campaigns in the election PartElection(K), proclaiming its gRPC
// address; clients and stores look the leader up there (PartLeader) instead of being given
// an address.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "etcd/etcd_client.h"

namespace kvpool::etcd {

// "kvpool/part/K".
std::string PartElection(uint32_t part);

// Looks up part K's leader. Never goes back to a term older than one it has seen: a leader
// deposed by a failover is not followed again, even if an etcd member that lags still names
// it. Thread-safe.
class PartLeader {
 public:
  PartLeader(std::shared_ptr<EtcdClient> etcd, uint32_t part) : etcd_(std::move(etcd)), part_(part) {}

  // The leader now: OK with its address and term; NOT_FOUND while nobody leads (a failover in
  // progress); UNAVAILABLE when etcd cannot be reached; STALE for an older term than seen.
  Result<Leader> Find(std::chrono::milliseconds timeout);

  uint32_t part() const { return part_; }
  const std::string& etcd_endpoints() const { return etcd_->endpoints(); }

 private:
  const std::shared_ptr<EtcdClient> etcd_;
  const uint32_t part_;
  std::mutex mu_;
  int64_t newest_term_ = 0;  // guarded by mu_
};

}  // namespace kvpool::etcd
