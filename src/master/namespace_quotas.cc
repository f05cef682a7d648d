#include "master/namespace_quotas.h"

#include <algorithm>

namespace kvpool::master {

uint64_t NamespaceQuotas::QuotaOf(std::string_view ns) const {
  const auto it = options_.bytes.find(ns);
  return it != options_.bytes.end() ? it->second : options_.default_bytes;
}

bool NamespaceQuotas::TryCharge(std::string_view ns, uint64_t bytes) {
  const uint64_t quota = QuotaOf(ns);
  if (quota == 0) return true;
  std::lock_guard lock(mu_);
  auto it = used_.find(ns);
  const uint64_t used = it == used_.end() ? 0 : it->second;
  if (used + bytes > quota) return false;
  if (it == used_.end()) it = used_.emplace(std::string(ns), 0).first;
  it->second += bytes;
  return true;
}

void NamespaceQuotas::Charge(std::string_view ns, uint64_t bytes) {
  if (QuotaOf(ns) == 0) return;
  std::lock_guard lock(mu_);
  auto it = used_.find(ns);
  if (it == used_.end()) it = used_.emplace(std::string(ns), 0).first;
  it->second += bytes;
}

void NamespaceQuotas::Release(std::string_view ns, uint64_t bytes) {
  if (QuotaOf(ns) == 0) return;
  std::lock_guard lock(mu_);
  auto it = used_.find(ns);
  if (it == used_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) used_.erase(it);  // namespaces come and go: keep only those holding bytes
}

uint64_t NamespaceQuotas::UsedBy(std::string_view ns) const {
  std::lock_guard lock(mu_);
  const auto it = used_.find(ns);
  return it == used_.end() ? 0 : it->second;
}

std::vector<NamespaceUsage> NamespaceQuotas::Usage() const {
  std::map<std::string, NamespaceUsage, std::less<>> all;
  for (const auto& [name, quota] : options_.bytes) all[name] = {name, 0, quota};
  std::lock_guard lock(mu_);
  for (const auto& [name, used] : used_) all[name] = {name, used, QuotaOf(name)};
  std::vector<NamespaceUsage> out;
  for (auto& [name, usage] : all) out.push_back(std::move(usage));
  return out;
}

}  // namespace kvpool::master
