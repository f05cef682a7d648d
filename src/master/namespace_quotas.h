// NamespaceQuotas: a byte quota per namespace, so that one model's or tenant's puts cannot
// evict another's objects beyond its share of the pool.
//
// A key's namespace is what comes before its first '/' ("" for a key without one): the
// connector's keys and groups begin with their KvNamespace's id ("<ns hex>/<chunk>/s<stage>"),
// so every model's KV is one namespace. A namespace's usage is the value bytes of its objects
// in the index (pending and complete; copies are the pool's business and are not counted).
// A put that would take its namespace past the quota first evicts that namespace's own least
// recently used objects (PoolMetadata::ChargeQuota); if that cannot make room the put fails
// NO_SPACE. With quotas that add up to no more than the pool, no namespace's puts ever evict
// another's objects.
//
// Thread-safe: one mutex, a leaf (nothing is called while it is held).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/tenant_claim.h"

namespace kvpool::master {

using kvpool::NamespaceOf;  // common/tenant_claim.h

struct QuotaOptions {
  std::map<std::string, uint64_t, std::less<>> bytes;  // namespace -> quota; 0 = no quota
  uint64_t default_bytes = 0;                          // every other namespace; 0 = no quota
};

struct NamespaceUsage {
  std::string name;
  uint64_t used_bytes = 0;
  uint64_t quota_bytes = 0;
};

class NamespaceQuotas {
 public:
  explicit NamespaceQuotas(QuotaOptions options) : options_(std::move(options)) {}

  // 0: the namespace has no quota (and its usage is not tracked).
  uint64_t QuotaOf(std::string_view ns) const;
  // Adds `bytes` to the namespace's usage unless that would pass its quota; true when added
  // (always, without a quota).
  bool TryCharge(std::string_view ns, uint64_t bytes);
  // Adds them even past the quota: objects a store gives back after a failover were admitted
  // once already.
  void Charge(std::string_view ns, uint64_t bytes);
  void Release(std::string_view ns, uint64_t bytes);
  uint64_t UsedBy(std::string_view ns) const;
  // Every namespace with a quota that holds bytes or has its own quota, by name.
  std::vector<NamespaceUsage> Usage() const;

 private:
  const QuotaOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t, std::less<>> used_;  // guarded by mu_
};

}  // namespace kvpool::master
