#include "store/segment_index.h"

#include <algorithm>

namespace kvpool::store {

void SegmentIndex::Apply(const proto::IndexRecord& record, int64_t now_unix_ms) {
  const proto::IndexEntry& e = record.entry();
  std::lock_guard lock(mu_);
  if (record.op() == proto::IndexRecord::HORIZON) {
    lease_horizon_unix_ms_ = std::max(lease_horizon_unix_ms_, record.lease_horizon_unix_ms());
    return;
  }
  if (record.op() == proto::IndexRecord::PLACE) {
    const uint64_t end = e.offset() + e.length();
    auto it = by_offset_.lower_bound(e.offset());
    if (it != by_offset_.begin()) {
      auto before = std::prev(it);
      if (before->first + before->second.length() > e.offset()) by_offset_.erase(before);
    }
    while (it != by_offset_.end() && it->first < end) it = by_offset_.erase(it);
    by_offset_.emplace(e.offset(), e);
    return;
  }
  auto it = by_offset_.find(e.offset());
  if (it == by_offset_.end() || it->second.put_id() != e.put_id()) return;
  switch (record.op()) {
    case proto::IndexRecord::COMMIT:
      it->second.set_complete(true);
      it->second.set_completed_unix_ms(now_unix_ms);
      break;
    case proto::IndexRecord::REMOVE:
      it->second.set_removed(true);
      break;
    case proto::IndexRecord::DROP:
      by_offset_.erase(it);
      break;
    default:
      break;  // an op this store does not know: a newer master; ignoring it keeps the entry
  }
}

void SegmentIndex::Snapshot(proto::MountSegmentRequest* out) const {
  std::lock_guard lock(mu_);
  out->mutable_entries()->Reserve(static_cast<int>(by_offset_.size()));
  for (const auto& [offset, entry] : by_offset_) *out->add_entries() = entry;
  out->set_lease_horizon_unix_ms(lease_horizon_unix_ms_);
}

size_t SegmentIndex::size() const {
  std::lock_guard lock(mu_);
  return by_offset_.size();
}

int64_t SegmentIndex::lease_horizon_unix_ms() const {
  std::lock_guard lock(mu_);
  return lease_horizon_unix_ms_;
}

void SegmentIndex::Clear() {
  std::lock_guard lock(mu_);
  by_offset_.clear();
  lease_horizon_unix_ms_ = 0;
}

}  // namespace kvpool::store
