// TenantClaim: who a tenant is and which namespaces of the pool it may use. A key's namespace
// is what comes before its first '/' (the connector's keys begin with their model's
// namespace id), so a claim of "team-a:1f2e...,9a8b..." lets team A read, write and remove
// those models' KV and nothing else.
//
// A claim travels in the clear as "NAME:NS1,NS2,..." next to a proof made with the tenant's
// key, which is derived from the pool's secret and the claim (SharedSecret::ForTenant): a
// verifier holding the pool's secret derives the same key from the claim it was sent, so a
// claim cannot be widened without the proof failing, and no tenant table has to be kept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvpool {

// The namespace of a key or group name: everything before its first '/', "" if none.
std::string_view NamespaceOf(std::string_view name);

struct TenantClaim {
  static constexpr size_t kMaxNamespaces = 64;
  static constexpr size_t kMaxText = 1024;

  std::string name;                     // letters, digits, '.', '_', '-'; 1-64 of them
  std::vector<std::string> namespaces;  // distinct, sorted; none empty or holding '/', ',' or ':'

  // "NAME:NS1,NS2" back into a claim, namespaces sorted; INVALID_ARGUMENT says what is wrong.
  static Result<TenantClaim> Parse(std::string_view text);
  std::string ToString() const;
  // True when `key`'s namespace is one of this claim's.
  bool Allows(std::string_view key) const;
};

}  // namespace kvpool
