// SegmentTable: the mounted segments and the liveness of the storage services that own
// them.
//
// A segment is mounted by its store, assigned an id that is never reused, and stays until
// it is unmounted or its store stops heartbeating for longer than the TTL. Removing a
// segment from the table only marks it dead; dropping the replicas that point at it is the
// caller's job (PoolMetadata), because objects live elsewhere.
//
// Thread-safe (one shared_mutex; lookups take it shared).
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "master/segment.h"

namespace kvpool::master {

class SegmentTable {
 public:
  explicit SegmentTable(uint64_t alignment);

  // Registers a segment under a fresh id (info.id is ignored) and counts the mount as a
  // heartbeat from its store.
  std::shared_ptr<Segment> Mount(SegmentInfo info, int64_t now_ms);
  // Registers a segment under the id it had before (info.id): a store rejoining a new master
  // with its index. Null when that id is mounted already. Later fresh ids are above it.
  std::shared_ptr<Segment> MountWithId(SegmentInfo info, int64_t now_ms);

  // Takes the segment out of the table and marks it dead; null if `id` is not mounted.
  std::shared_ptr<Segment> Remove(uint64_t id);

  // Null if `id` is not mounted.
  std::shared_ptr<Segment> Find(uint64_t id) const;

  // Every mounted segment, in id order.
  std::vector<std::shared_ptr<Segment>> Snapshot() const;

  // Records that `store_id` is alive at `now_ms`. Returns the ids in `segment_ids` that are
  // not mounted for this store (dropped earlier), which the store must remount.
  std::vector<uint64_t> Heartbeat(const std::string& store_id,
                                  std::span<const uint64_t> segment_ids, int64_t now_ms);

  // Ids of segments whose store has been silent for longer than `ttl_ms`. Forgets those
  // stores, so each expiry is reported once.
  std::vector<uint64_t> TakeExpiredSegments(int64_t now_ms, uint64_t ttl_ms);

  // Counts every known store as heard from at `now_ms`: a master that could not hear them
  // (it did not serve for a while) must not drop them for its own silence.
  void ForgiveSilence(int64_t now_ms);

  uint64_t capacity_bytes() const;
  uint64_t used_bytes() const;

 private:
  // Adds a segment under info.id and counts it as a heartbeat. REQUIRES: mu_ held exclusively.
  std::shared_ptr<Segment> InsertLocked(SegmentInfo info, int64_t now_ms);

  const uint64_t alignment_;
  mutable std::shared_mutex mu_;
  // Fresh ids start at the wall clock's milliseconds, so a restarted master or a new leader
  // does not hand out an id that a segment still rejoining had under the one before (a
  // client that cached that id would reach the wrong store). Below 2^48: clients name part
  // p's segment id as (p << 48) | id.
  uint64_t next_id_;                                                  // guarded by mu_
  std::unordered_map<uint64_t, std::shared_ptr<Segment>> segments_;  // guarded by mu_
  std::unordered_map<std::string, int64_t> store_last_seen_ms_;      // guarded by mu_
};

}  // namespace kvpool::master
