#include "master/namespace_hits.h"

#include <algorithm>
#include <map>

#include "common/tenant_claim.h"

namespace kvpool::master {

void NamespaceHits::Add(std::span<const std::string_view> keys, std::span<const Outcome> outcomes) {
  // This call's own tally first, so the lock is taken once however many keys it had.
  std::map<std::string_view, std::pair<uint64_t, uint64_t>> call;
  for (size_t i = 0; i < keys.size() && i < outcomes.size(); ++i) {
    if (outcomes[i] == Outcome::kSkipped) continue;
    auto& [hits, misses] = call[NamespaceOf(keys[i])];
    ++(outcomes[i] == Outcome::kHit ? hits : misses);
  }
  std::lock_guard lock(mu_);
  for (const auto& [name, tally] : call) {
    auto it = counts_.find(std::string(name));
    if (it == counts_.end()) {
      const bool room = counts_.size() < kMaxNamespaces;  // past it, one more entry (kOther) takes all
      const std::string key = room ? std::string(name) : std::string(kOther);
      it = counts_.try_emplace(key, NamespaceHitCount{key, 0, 0}).first;
    }
    it->second.hits += tally.first;
    it->second.misses += tally.second;
  }
}

std::vector<NamespaceHitCount> NamespaceHits::Snapshot() const {
  std::vector<NamespaceHitCount> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, count] : counts_) out.push_back(count);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace kvpool::master
