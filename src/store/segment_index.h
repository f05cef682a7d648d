// SegmentIndex: the store's copy of the index of its own segment — which object (key, put,
// group, pin, state) sits at which offset. The master appends every change to the segment's
// journal and answers its client only once the store has applied it (PullIndex); when the
// master restarts or a standby takes over, the store rejoins with this copy and the new
// master rebuilds the pool from it (docs/architecture.md, invariant 8).
//
// Thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "proto/master.pb.h"

namespace kvpool::store {

class SegmentIndex {
 public:
  // Applies one change. PLACE replaces whatever overlapped the new range (its bytes are the
  // new object's now); COMMIT, REMOVE and DROP act only on the entry at that offset placed by
  // that put, so a late record about an older object never touches a newer one.
  void Apply(const proto::IndexRecord& record, int64_t now_unix_ms);

  // Every entry, in offset order, and the lease horizon promised so far (for a rejoin).
  void Snapshot(proto::MountSegmentRequest* out) const;

  size_t size() const;
  int64_t lease_horizon_unix_ms() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, proto::IndexEntry> by_offset_;  // guarded by mu_
  int64_t lease_horizon_unix_ms_ = 0;                // guarded by mu_
};

}  // namespace kvpool::store
