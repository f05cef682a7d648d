#include "master/takeover_gate.h"

#include <algorithm>
#include <iterator>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

namespace kvpool::master {

void TakeoverGate::Close(Clock::time_point deadline) {
  std::lock_guard lock(mu_);
  closed_at_ = Clock::now();
  deadline_ = deadline;
  listed_ = false;
  expected_.clear();
  joined_.clear();
  open_.store(false);
}

void TakeoverGate::Expect(std::set<std::string> stores) {
  std::lock_guard lock(mu_);
  listed_ = true;
  expected_ = std::move(stores);
}

void TakeoverGate::Joined(const std::string& store_id) {
  if (open_.load()) return;
  std::lock_guard lock(mu_);
  joined_.insert(store_id);
}

bool TakeoverGate::Open() {
  if (open_.load()) return true;
  std::lock_guard lock(mu_);
  if (open_.load()) return true;
  if (listed_ && std::includes(joined_.begin(), joined_.end(), expected_.begin(), expected_.end())) {
    OpenLocked("every store registered in etcd has rejoined");
  } else if (Clock::now() >= deadline_) {
    std::set<std::string> missing;
    std::set_difference(expected_.begin(), expected_.end(), joined_.begin(), joined_.end(),
                        std::inserter(missing, missing.end()));
    OpenLocked(listed_ ? fmt::format("the takeover wait ran out; still registered but not rejoined: {}",
                                     fmt::join(missing, ", "))
                       : "the takeover wait ran out before etcd listed the registered stores");
  }
  return open_.load();
}

void TakeoverGate::OpenLocked(const std::string& why) {
  open_.store(true);
  spdlog::info("{}: clients answered {} ms into the term ({} stores rejoined): {}", who_,
               std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - closed_at_).count(),
               joined_.size(), why);
}

}  // namespace kvpool::master
