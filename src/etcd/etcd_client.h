// EtcdClient: the few etcd v3 calls kvpool needs — leases, elections, keys under a lease —
// over gRPC.
//
// It talks to a list of endpoints ("HOST:PORT,HOST:PORT", each optionally "http://..."): a
// call that cannot reach one endpoint moves on to the next within its deadline, and the next
// call starts where the last one succeeded. TLS endpoints are refused with a clear error.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace kvpool::etcd {

// A won election: what Resign needs, and the term (the leader key's create revision, which
// grows with every new leader of the election).
struct LeaderKey {
  std::string name;
  std::string key;
  int64_t term = 0;
  int64_t lease = 0;
};

// Who leads an election now.
struct Leader {
  std::string value;  // what the leader proclaimed
  int64_t term = 0;   // its leader key's create revision
};

// Lets another thread cut a blocking Campaign short. Cancel() is sticky.
class Canceller {
 public:
  void Cancel();
  bool cancelled() const;

 private:
  friend class EtcdClient;
  // Registers the call's context; false if already cancelled.
  bool Enter(grpc::ClientContext* context);
  void Leave();
  // Waits `pause`; true if cancelled meanwhile.
  bool CancelledWithin(std::chrono::milliseconds pause);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool cancelled_ = false;                 // guarded by mu_
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
};

class EtcdClient {
 public:
  using Millis = std::chrono::milliseconds;

  // Parses the endpoint list; connects lazily. INVALID_ARGUMENT names a malformed endpoint.
  static Result<std::unique_ptr<EtcdClient>> Create(std::string_view endpoints);
  ~EtcdClient();

  const std::string& endpoints() const { return spec_; }

  // A new lease of `ttl` (etcd may raise it to its minimum). Returns {id, granted ttl}.
  struct Lease {
    int64_t id = 0;
    std::chrono::seconds ttl{0};
  };
  Result<Lease> GrantLease(std::chrono::seconds ttl, Millis timeout);
  // Renews `lease`; returns the ttl it now has. NOT_FOUND when the lease has expired or was
  // revoked.
  Result<std::chrono::seconds> KeepAlive(int64_t lease, Millis timeout);
  Status RevokeLease(int64_t lease, Millis timeout);

  // Blocks until this campaigner leads `election` (its key lives as long as `lease`), or
  // `cancel` fires (UNAVAILABLE), or etcd refuses (e.g. the lease expired: NOT_FOUND).
  Result<LeaderKey> Campaign(std::string_view election, int64_t lease, std::string_view value,
                             Canceller* cancel);
  // The election's leader now; NOT_FOUND when nobody leads it.
  Result<Leader> GetLeader(std::string_view election, Millis timeout);
  // Gives up a won election; the next campaigner leads at once.
  Status Resign(const LeaderKey& leader, Millis timeout);

  // Sets `key` to `value`; etcd deletes it when `lease` ends (0: never).
  Status Put(std::string_view key, std::string_view value, int64_t lease, Millis timeout);
  // Every key starting with `prefix` (not empty), with its value, in key order.
  Result<std::vector<std::pair<std::string, std::string>>> List(std::string_view prefix, Millis timeout);

 private:
  EtcdClient(std::string spec, std::vector<std::string> endpoints);
  std::shared_ptr<grpc::Channel> Channel(size_t endpoint);
  // Forgets an endpoint's channel after it failed: gRPC 1.51's channel to an etcd that was
  // restarted can stay stuck in failed handshakes, while a new one connects at once.
  void DropChannel(size_t endpoint);

  // Runs `call` on each endpoint in turn, from the last good one, until one answers (any
  // Status but UNAVAILABLE / TIMEOUT) or `timeout` has passed; returns the last Status.
  using Attempt = std::function<Status(const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint,
                                       std::chrono::system_clock::time_point deadline)>;
  Status OnSomeEndpoint(Millis timeout, const Attempt& call);

  const std::string spec_;
  const std::vector<std::string> endpoints_;
  std::atomic<size_t> preferred_{0};  // the endpoint that answered last
  std::mutex mu_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // guarded by mu_; lazily made
};

}  // namespace kvpool::etcd
