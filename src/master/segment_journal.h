// SegmentJournal: the changes to one segment's index that its store has not confirmed yet.
//
// Every store keeps the index of the objects in its own segment (store/segment_index.h), so
// that a new master — a restarted one, or a standby that took over — can rebuild the pool
// from the stores. The master appends a record for every placement, completion and removal
// of an object in the segment; the store pulls them (PullIndex, a long poll) and confirms.
// A call that placed or completed objects answers its client only once the stores holding
// them confirmed: what a client was told is in some store's index (docs/architecture.md,
// invariant 8).
//
// Records are numbered 1, 2, ... within one journal; a journal lives as long as one mount,
// and its random id tells the store that the numbering started again.
//
// Thread-safe (one mutex, a leaf in PoolMetadata's lock order).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#include "proto/master.pb.h"

namespace kvpool::master {

class SegmentJournal {
 public:
  // A journal whose store lags more than this many records is broken: the master drops the
  // segment (the store rejoins with what it has) rather than buffer without bound.
  static constexpr size_t kMaxUnconfirmed = 1 << 20;

  SegmentJournal();
  SegmentJournal(const SegmentJournal&) = delete;
  SegmentJournal& operator=(const SegmentJournal&) = delete;

  uint64_t id() const { return id_; }

  // Appends a record and returns its sequence number; 0 when the journal is closed or broken
  // (nothing to wait for: the segment is going away).
  uint64_t Append(proto::IndexRecord record);

  // Appends a HORIZON record promising `target` unless one promising at least `needed` is
  // already in the journal. Returns the sequence number to wait for (0 when closed).
  uint64_t PromiseLeaseHorizon(int64_t needed_unix_ms, int64_t target_unix_ms);
  // The largest horizon appended so far (confirmed or not).
  int64_t lease_horizon_unix_ms() const;

  // The sequence number of the latest record appended (0: none yet).
  uint64_t last_seq() const;

  // True once the store confirmed record `seq`. Waits until then or `deadline`.
  bool WaitConfirmed(uint64_t seq, std::chrono::steady_clock::time_point deadline);

  // The store's side: confirms records up to `acked_seq` (when `journal_id` is this journal;
  // a store that knew another journal has confirmed nothing here), then waits up to `wait`
  // for unconfirmed records and answers with at most `max_records` of them.
  void Pull(uint64_t journal_id, uint64_t acked_seq, std::chrono::milliseconds wait,
            size_t max_records, proto::PullIndexReply* reply);

  // Wakes every waiter; later appends and waits fail. Idempotent.
  void Close();
  bool broken() const;

 private:
  const uint64_t id_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<proto::IndexRecord> unconfirmed_;  // records confirmed_ + 1, confirmed_ + 2, ...
  uint64_t confirmed_ = 0;
  uint64_t next_seq_ = 1;
  int64_t horizon_unix_ms_ = 0;
  uint64_t horizon_seq_ = 0;
  bool closed_ = false;
  bool broken_ = false;
};

}  // namespace kvpool::master
