// TierMover: a storage service's side of the SSD tier (issue 17) — it owns the store's
// ssd::SsdTier and moves objects between it and the segment when the master's journal says so
// (master/pool_tiering.cc has the master's side and why no reader sees wrong bytes).
//
//   DEMOTE    queued; a worker thread (or DemoteQueued, with demote_inline) copies the object's segment bytes into the tier (checked
//             against the writer's checksum on the way) and reports DEMOTED or DEMOTE_FAILED.
//   PROMOTE   loaded from the tier into the segment before the store confirms the record (the
//             caller applies it to the index only when Promote says it was loaded); the SSD
//             copy is then removed, so a store holds one copy of an object.
//   DROP_SSD  the key leaves the tier.
//   TOUCH_SSD a client reads the key from the tier's file itself (the segment server hands the
//             file out): its group becomes the most recently used.
// Keys the tier evicts to make room are reported SSD_EVICTED. Reports go to the master with
// the store's next PullIndex (TakeReports; PutBackReports when that call failed).
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "proto/master.pb.h"
#include "ssd/ssd_tier.h"

namespace kvpool::store {

struct TierMoverOptions {
  std::string path;                             // the tier's file
  uint64_t size_bytes = 0;                      // REQUIRES: > 0
  uint64_t max_value_bytes = uint64_t{8} << 20;  // the largest object it takes (its slot size)
  // No worker: demotions wait in the queue until DemoteQueued runs them on the caller's
  // thread, for a pool whose results must not depend on when a worker gets to them (one on an
  // emulated clock).
  bool demote_inline = false;
};

// What the mover did since it opened (the store's /metrics): objects and bytes moved each
// way, and the seconds the tier's file spent on them (bytes / seconds: its GB/s while busy).
struct TierMoverStats {
  uint64_t demoted = 0, demote_failed = 0, demoted_bytes = 0;
  double demote_seconds = 0;
  uint64_t promoted = 0, promote_failed = 0, promoted_bytes = 0;
  double promote_seconds = 0;
};

class TierMover {
 public:
  // Opens the tier (rebuilding what is on the file) over `segment`, the store's memory.
  static Result<std::unique_ptr<TierMover>> Open(const TierMoverOptions& options, std::span<std::byte> segment);
  ~TierMover();  // stops the worker; queued demotions are dropped (the master learns nothing,
                 // and a new master knows the objects only from the segment's index)
  TierMover(const TierMover&) = delete;
  TierMover& operator=(const TierMover&) = delete;

  uint64_t capacity_bytes() const;
  uint64_t max_value_bytes() const { return tier_->max_value_bytes(); }

  void Demote(const proto::IndexEntry& entry);
  // With demote_inline: runs the queued demotions now, on this thread, one by one in the
  // order queued (their reports follow).
  // Without, nothing: the worker runs them.
  void DemoteQueued();
  // Loads each entry's object into the segment at its offset; true for those loaded. A failure
  // is reported PROMOTE_FAILED (with the reason), to go with the ack of its record.
  std::vector<bool> Promote(std::span<const proto::IndexEntry* const> entries);
  void DropFromSsd(const std::string& key);
  // A client was sent to read `key` from the file (TOUCH_SSD): it is recently used there.
  void MarkRead(const std::string& key);
  // The tier's file, for the segment server's tier reads (ServedSegment::tier_fd).
  const ssd::TierFile& file() const { return tier_->file(); }

  std::vector<proto::TierReport> TakeReports();
  void PutBackReports(std::vector<proto::TierReport> reports);  // before any newer ones
  // The tier's objects as index entries with on_ssd (offset: where the value lies in the file),
  // for a mount or a rejoin.
  void AppendObjects(proto::MountSegmentRequest* request) const;
  ssd::SsdTierStats stats() const { return tier_->stats(); }
  TierMoverStats mover_stats() const;

 private:
  TierMover(std::unique_ptr<ssd::SsdTier> tier, std::span<std::byte> segment);
  void Work();
  std::vector<proto::IndexEntry> TakeBatchLocked();  // the next batch of queued demotions
  // Writes `batch` into the tier and reports each DEMOTED or DEMOTE_FAILED.
  void DemoteBatch(const std::vector<proto::IndexEntry>& batch);
  void Report(proto::TierReport::Kind kind, const std::string& key, uint64_t put_id, const std::string& message);
  void ReportEvictedLocked();

  const std::unique_ptr<ssd::SsdTier> tier_;
  const std::span<std::byte> segment_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<proto::IndexEntry> queue_;        // demotions to do; guarded by mu_
  std::vector<proto::TierReport> reports_;     // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  TierMoverStats moved_;                       // guarded by mu_
  std::thread worker_;
};

}  // namespace kvpool::store
