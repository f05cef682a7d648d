// MountClient: the storage service's side of the master's MountSegment, Heartbeat and
// UnmountSegment calls. Adds what every call needs (a deadline, a Status a person can act on)
// and a way to cut short calls that a stopping service no longer wants answered.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "etcd/part_leader.h"
#include "proto/master.grpc.pb.h"
#include "proto/rpc_credentials.h"

namespace kvpool::store {

// What the master said when it accepted a segment.
struct MountGrant {
  uint64_t segment_id = 0;
  std::chrono::milliseconds heartbeat_ttl{0};  // silent longer than this => dropped
  std::chrono::milliseconds max_lease{0};      // longest read lease the master hands out
  uint64_t rebuilt_objects = 0;                // a rejoin: objects the master took back
};

class MountClient {
 public:
  // Connects lazily; nothing is sent until the first call. `part`: the pool part this store
  // joins (a master of another part refuses the mount). With `etcd` endpoints (and no
  // address), the master is whichever leads the part's election (etcd/part_leader.h).
  // `credentials`: the pool's secret and TLS CA, brought to every master it calls.
  MountClient(std::string master_address, std::string etcd, uint32_t part, std::chrono::milliseconds rpc_timeout,
              proto::RpcCredentials credentials = {});
  MountClient(const MountClient&) = delete;
  MountClient& operator=(const MountClient&) = delete;

  // The master calls go to now ("" while etcd names none yet).
  std::string master_address() const;
  bool follows_leader() const { return leader_ != nullptr; }

  // After a call failed: asks etcd who leads the part now (within rpc_timeout) and sends
  // later calls there. True when that is a different master than before. A store follows
  // only the newest term etcd has named (PartLeader): it never goes back to a deposed leader.
  bool FollowLeader();

  // Asks the master to take the segment (endpoint.segment_id is ignored; the master assigns).
  // Waits up to rpc_timeout for the master to become reachable: a store started alongside its
  // master should not fail because it won the race. An unreachable master is UNAVAILABLE.
  Result<MountGrant> Mount(const proto::SegmentEndpoint& endpoint);
  // Mounts with everything `request` says (keeps_index; a rejoin's id and index). The part
  // is filled in here. A rejoin carries a whole index, so it may take up to `timeout`.
  Result<MountGrant> Mount(proto::MountSegmentRequest request, std::chrono::milliseconds timeout);

  // The store's long poll for changes to its index: confirms `acked_seq` of `journal_id` and
  // returns the next records. STALE when the master does not know the segment.
  // `reports`: what the store's SSD tier did (store/tier_mover.h), applied by the master
  // before it confirms acked_seq.
  Result<proto::PullIndexReply> PullIndex(uint64_t segment_id, uint64_t journal_id, uint64_t acked_seq,
                                          const std::vector<proto::TierReport>& reports = {});

  // Reports the store alive. Returns the ids among `segment_ids` the master does not know
  // (it dropped them); an error when the master could not be reached.
  Result<std::vector<uint64_t>> Heartbeat(const std::string& store_id,
                                          const std::vector<uint64_t>& segment_ids);

  // Tells the master the segment is going away. Fails fast if the master is unreachable.
  Status Unmount(uint64_t segment_id);

  // Cancels in-flight Mount/Heartbeat calls and makes later ones fail at once, so that a
  // stopping service does not wait out their deadlines. Unmount is not affected: Stop() sends
  // it after interrupting everything else.
  void Interrupt();

 private:
  // One MountSegment call. By reference: a rejoin's request carries the segment's whole index.
  Result<MountGrant> MountOnce(const proto::MountSegmentRequest& request, std::chrono::milliseconds timeout);
  // Registers `context` as interruptible; false if Interrupt() already ran.
  bool Enter(grpc::ClientContext* context);
  void Leave(grpc::ClientContext* context);

  // The stub and address calls use now; null/"" while no leader is known.
  std::shared_ptr<proto::Master::Stub> Stub(std::string* address);
  // Makes one interruptible call, `rpc(stub)`, to the master as now resolved (its address in
  // `address`). UNAVAILABLE, without calling, when the service is stopping or no master is
  // known; otherwise the call's gRPC status.
  template <typename Rpc>
  Result<grpc::Status> CallMaster(grpc::ClientContext* context, std::string* address, Rpc rpc) {
    if (!Enter(context)) return Unavailable("storage service is stopping");
    std::shared_ptr<proto::Master::Stub> stub = Stub(address);
    if (!stub) {
      Leave(context);
      return Unavailable("no master to call: " + *address);
    }
    grpc::Status status = rpc(*stub);
    Leave(context);
    return status;
  }
  void Point(const std::string& address);  // REQUIRES: mu_ held

  const uint32_t part_;
  const std::chrono::milliseconds rpc_timeout_;
  const proto::RpcCredentials credentials_;
  const std::unique_ptr<etcd::PartLeader> leader_;  // null: a fixed master address

  mutable std::mutex mu_;
  std::string address_;                         // guarded by mu_
  std::shared_ptr<proto::Master::Stub> stub_;   // guarded by mu_
  bool interrupted_ = false;                 // guarded by mu_
  std::set<grpc::ClientContext*> in_flight_;  // guarded by mu_
};

}  // namespace kvpool::store
