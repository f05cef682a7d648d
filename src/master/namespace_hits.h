// NamespaceHits: lookups that found their key, and those that did not, per namespace (a key's
// part before its first '/'; a model's KV is one), for /metrics. A client names namespaces
// freely, so at most kMaxNamespaces are counted apart; lookups of any further one count under
// kOther. Thread-safe; one lock per lookup call, not per key.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvpool::master {

struct NamespaceHitCount {
  std::string name;
  uint64_t hits = 0, misses = 0;
};

class NamespaceHits {
 public:
  static constexpr size_t kMaxNamespaces = 256;
  static constexpr std::string_view kOther = "(other)";

  // One call's keys and, for each, whether it was found (skipped keys: counted by neither).
  enum class Outcome : char { kSkipped, kHit, kMiss };
  void Add(std::span<const std::string_view> keys, std::span<const Outcome> outcomes);
  std::vector<NamespaceHitCount> Snapshot() const;  // sorted by name

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, NamespaceHitCount> counts_;  // guarded by mu_
};

}  // namespace kvpool::master
