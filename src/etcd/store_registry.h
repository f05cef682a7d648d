// Which stores serve a pool part, as etcd records them.
//
// A store that follows etcd registers itself under StoreRegistryPrefix(K) + its store id, on a
// lease of its own that it renews: the key lives as long as the store does, and `ttl` past its
// last renewal. A master that has just won part K's election lists the registry and answers
// clients once every registered store has rejoined it (master/takeover_gate.h), instead of
// guessing how long rejoining takes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "etcd/etcd_client.h"

namespace kvpool::etcd {

// "kvpool/stores/K/". Not under the election's prefix "kvpool/part/K/": the election counts
// every key there as a campaigner.
std::string StoreRegistryPrefix(uint32_t part);

// The store ids registered for part K now.
Result<std::set<std::string>> RegisteredStores(EtcdClient& etcd, uint32_t part, std::chrono::milliseconds timeout);

// Keeps one store registered from construction to destruction, in a thread of its own: grants
// a lease, puts the key, renews every ttl/4, and registers again when etcd lost the lease
// (etcd away longer than ttl). Thread-safe.
class StoreRegistration {
 public:
  // `value`: what an operator listing the registry sees (the store's tcp address).
  StoreRegistration(std::shared_ptr<EtcdClient> etcd, uint32_t part, std::string store_id, std::string value,
                    std::chrono::seconds ttl);
  // Stops renewing and revokes the lease: the store leaves the registry at once, so a new
  // leader does not wait for it.
  ~StoreRegistration();
  StoreRegistration(const StoreRegistration&) = delete;
  StoreRegistration& operator=(const StoreRegistration&) = delete;

  // Whether the key is in etcd as far as the last call knew.
  bool registered() const;

 private:
  void Run();
  // Renews the lease; registers again when etcd has lost it.
  Status Renew();
  // Grants a lease if there is none and puts the key on it.
  Status Register();

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string key_;
  const std::string value_;
  const std::chrono::seconds ttl_;
  // Every call takes at most a quarter of the ttl, and calls repeat that often, so a renewal
  // that failed is retried well before the lease would end.
  const std::chrono::milliseconds quarter_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  // Touched by the thread only (and by the destructor once it has joined).
  int64_t lease_ = 0;  // 0: none
  std::atomic<bool> registered_{false};
  std::thread thread_;
};

}  // namespace kvpool::etcd
