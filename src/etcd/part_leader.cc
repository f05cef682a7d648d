#include "etcd/part_leader.h"

#include <fmt/format.h>

#include "common/host_port.h"

namespace kvpool::etcd {

std::string PartElection(uint32_t part) { return fmt::format("kvpool/part/{}", part); }

Result<Leader> PartLeader::Find(std::chrono::milliseconds timeout) {
  auto leader = etcd_->GetLeader(PartElection(part_), timeout);
  if (!leader.ok()) {
    if (leader.status().code() == StatusCode::kNotFound)
      return NotFound(fmt::format("no master leads part {} in etcd {} yet (is `kvpool master --etcd {} --part {}` "
                                  "running?)",
                                  part_, etcd_->endpoints(), etcd_->endpoints(), part_));
    return leader.status();
  }
  if (Status s = CheckHostPort(leader->value); !s.ok())
    return Internal(fmt::format("etcd names '{}' as part {}'s leader, which is not HOST:PORT", leader->value, part_));
  std::lock_guard lock(mu_);
  if (leader->term < newest_term_)
    return Stale(fmt::format("etcd names a leader of part {} of term {}, older than term {} already seen", part_,
                             leader->term, newest_term_));
  newest_term_ = leader->term;
  return leader;
}

}  // namespace kvpool::etcd
