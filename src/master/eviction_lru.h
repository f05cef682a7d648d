// EvictionLru: the eviction order over *eviction units* — a named group, or one ungrouped
// object — kept up to date as objects complete, are read and go away, so that an eviction
// pass costs what it evicts, not what the pool holds.
//
// A unit is in exactly one place:
//   unpinned   ranked by its most recent access (least recent first)  — evicted first
//   retained   units a router retains (and no pin of their own runs), ranked by when the
//              router expects them read again, the farthest first — evicted when no unpinned
//              unit is left; a unit moves to `unpinned` when its retention ends
//   pinned     ranked by recency, for units with a soft pin of their members still running —
//              evicted only when nothing else is left; to `unpinned` when the pin ends
//   deferred   known to be blocked (leased) until a time; invisible to passes until then,
//              then back in its ranked place
//   checked out  handed to the eviction pass, which either evicts it or gives it back
// A group's recency is the latest put end or read of any member (a member that leaves does
// not make the group older); it is pinned while any current member's pin runs.
//
// Router hints (issue 18) act on whole units: Retain keeps a unit over unpinned ones until a
// time (a session waiting for a tool keeps its history over others' churn), ranked by when it
// is expected to be read again: the retained unit needed last is evicted first, the way an
// optimal cache would choose (a session that just ended a turn before one that is queued). At
// most a given number of units are retained at once; beyond it a retention expected sooner
// takes the place of the one expected last. Release ends a retention and ranks the unit least
// recent of all, first to evict, until it is read or written again (a session that ended).
//
// The order is a hint about *which* unit to try: the pass re-checks every unit under the
// object-shard locks (leases, pending members, membership) before it evicts anything, so a
// unit that changed after it was ranked is given back, never half-evicted.
//
// Cost: Add is O(1) amortized (units sit in per-millisecond buckets, and most go to the
// newest one); filing a unit at an older time (a rejoin, a pin or a deferral that ended) is
// O(log buckets). A read (Touch) only records its time; a unit read since it was filed is
// moved when it reaches the front, once however many reads it had. So CheckOut is O(units
// handed out + units read since they were filed), the second paid for by those reads.
//
// Thread-safe: one mutex, a leaf — nothing is called out while it is held. Callers hold the
// object's shard lock when they add, touch or remove it (that keeps a unit id valid while
// they use it); the eviction pass holds no shard lock while checking units out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "master/key_hash.h"

namespace kvpool::master {

class EvictionLru {
 public:
  using UnitId = uint32_t;
  static constexpr UnitId kNoUnit = UINT32_MAX;

  // A unit handed to the eviction pass: enough to find its objects again under their locks.
  struct Candidate {
    UnitId unit = kNoUnit;
    uint32_t generation = 0;  // tells a reused unit id from this one
    bool is_group = false;
    std::string name;     // group name, or the key of the ungrouped object
    uint64_t put_id = 0;  // ungrouped only: the put that was ranked
  };

  EvictionLru() = default;
  EvictionLru(const EvictionLru&) = delete;
  EvictionLru& operator=(const EvictionLru&) = delete;

  // An ungrouped complete object becomes a unit of its own, ranked at `last_access_ms`.
  // `blocked_until_ms` > now defers it (a rejoined object, leased until the horizon).
  // REQUIRES: `*key` stays alive and unchanged until Leave (it is the index's own key).
  UnitId AddObject(const std::string* key, uint64_t put_id, int64_t last_access_ms,
                   int64_t pin_until_ms, int64_t blocked_until_ms, int64_t now_ms);
  // A complete member joins its group's unit (created with the first member).
  // REQUIRES: `*group` stays alive and unchanged until its last member leaves (it is the
  // GroupRegistry's copy of the name).
  UnitId JoinGroup(const std::string* group, int64_t last_access_ms, int64_t pin_until_ms,
                   int64_t blocked_until_ms, int64_t now_ms);
  // The object that was added (or joined) with `pin_until_ms` is gone. An ungrouped unit
  // ends; a group's ends with its last member, and otherwise is ranked again (its pin may
  // have ended, and a lease that deferred it may have left with the member).
  // REQUIRES: the object's shard lock is held and the object was added and not left.
  void Leave(UnitId unit, int64_t pin_until_ms, int64_t now_ms);
  // An access (a read or a member's put end) at `now_ms`: the unit becomes most recent. A
  // read only records the time; the unit moves when a pass would otherwise reach it.
  // REQUIRES: as for Leave.
  void Touch(UnitId unit, int64_t now_ms);
  // Touch of every unit in `units` under one lock (a read batch's hits in one shard).
  void TouchAll(std::span<const UnitId> units, int64_t now_ms);

  // ---- the eviction pass (REQUIRES: one pass at a time) ----
  // Ranks again the units whose deferral or pin has ended by `now_ms`, then hands out up to
  // `max` units in eviction order: unpinned least recent first, then pinned.
  std::vector<Candidate> CheckOut(size_t max, int64_t now_ms);
  // Gives a checked-out unit that was not evicted back: deferred until `blocked_until_ms` if
  // that is past `now_ms`, else to its ranked place. A no-op if the unit ended meanwhile.
  void GiveBack(const Candidate& candidate, int64_t blocked_until_ms, int64_t now_ms);

  // ---- router hints ----
  // Retains `unit` until `until_ms` (> now_ms), expected to be read again at `reuse_at_ms`,
  // or, retained already, moves both there. With `max_retained` units retained already, the
  // retained unit ranked farthest is displaced (its retention ends) if it is expected later
  // than `reuse_at_ms`; otherwise false, and nothing changes.
  // REQUIRES: as for Leave.
  bool Retain(UnitId unit, int64_t until_ms, int64_t reuse_at_ms, size_t max_retained, int64_t now_ms);
  // Ends the unit's retention and ranks it before every other unit of its place.
  // REQUIRES: as for Leave.
  void Release(UnitId unit, int64_t now_ms);
  // Units whose retention has not ended (as of the latest pass, Retain or Release).
  size_t retained_units() const;
  // Retentions that ended because one expected sooner took their place.
  uint64_t displaced_retentions() const;

  // Units alive (in any place).
  size_t unit_count() const;
  // Units ever handed out by CheckOut: what eviction passes cost (tests and benchmarks).
  uint64_t checked_out_total() const;
  // Units CheckOut moved back because they were read after they were filed: once per unit
  // per filing, however many reads — the deferred share of the reads' cost.
  uint64_t reranked_total() const;

 private:
  enum class Place : uint8_t { kFree, kUnpinned, kRetained, kPinned, kDeferred, kCheckedOut };
  struct Bucket;
  struct GroupUnit {
    UnitId unit = kNoUnit;
    uint32_t members = 0;
    // Pins of the current members, as (pin_until_ms, members with it); few distinct values.
    std::vector<std::pair<int64_t, uint32_t>> pins;
  };
  struct Unit {
    int64_t last_access_ms = 0;
    int64_t pin_until_ms = 0;     // its members' pins (the latest)
    int64_t retain_until_ms = 0;  // a router's Retain; 0: none
    int64_t reuse_at_ms = 0;      // when that router expects it read again
    bool retained = false;        // counted in retained_units_
    const std::string* name = nullptr;  // the index's key, or the registry's group name
    GroupUnit* group = nullptr;         // null for an ungrouped object
    uint64_t put_id = 0;                // ungrouped only
    Bucket* bucket = nullptr;           // where it is filed; null when checked out or free
    UnitId prev = kNoUnit, next = kNoUnit;  // neighbours in its bucket
    uint32_t generation = 0;
    Place place = Place::kFree;
  };
  // Units filed at one millisecond, in the order they arrived (ties are not ranked).
  struct Bucket {
    int64_t time_ms = 0;
    UnitId head = kNoUnit, tail = kNoUnit;
  };
  // Units ordered by a time: recency for unpinned and pinned, the expected reuse negated for
  // retained (the farthest first), the end for deferred.
  using TimeOrder = std::map<int64_t, Bucket>;
  struct PinEnd {
    int64_t pin_until_ms;
    UnitId unit;
    uint32_t generation;
    bool operator>(const PinEnd& other) const { return pin_until_ms > other.pin_until_ms; }
  };

  UnitId NewUnitLocked();
  void FreeUnitLocked(UnitId id);
  TimeOrder& OrderOf(Place place);
  void LinkLocked(UnitId id, Place place, int64_t time_ms);
  void UnlinkLocked(UnitId id);
  // Files a unit that is linked nowhere: deferred if blocked past now, else ranked.
  void FileLocked(UnitId id, int64_t blocked_until_ms, int64_t now_ms);
  void ReleaseDueLocked(int64_t now_ms);
  static int64_t MaxPin(const GroupUnit& group);
  // Where a unit that is not deferred is ranked at `now_ms`: pinned while a member's pin runs,
  // else retained while its retention runs, else unpinned.
  static Place RankedPlace(const Unit& u, int64_t now_ms);
  void EndRetentionLocked(Unit& u);
  // Ends the retention of the retained unit expected farthest, if later than `reuse_at_ms`.
  bool DisplaceFarthestLocked(int64_t reuse_at_ms, int64_t now_ms);
  // Files a ranked unit again after its pin or recency changed; a deferred or checked-out one
  // is filed with the change when it comes back.
  void RankAgainLocked(UnitId id, int64_t now_ms);
  void TouchLocked(UnitId id, int64_t now_ms);

  mutable std::mutex mu_;
  std::deque<Unit> units_;        // guarded by mu_; ids index it, addresses are stable
  std::vector<UnitId> free_ids_;  // guarded by mu_
  TimeOrder unpinned_, retained_, pinned_, deferred_;  // guarded by mu_
  // When each pin or retention ends; entries of units that moved since are skipped.
  std::priority_queue<PinEnd, std::vector<PinEnd>, std::greater<PinEnd>> pin_ends_;  // mu_
  // Keyed by views of the registry's names (see JoinGroup).
  std::unordered_map<std::string_view, GroupUnit, KeyHash, KeyEqual> groups_;  // guarded by mu_
  size_t live_units_ = 0;           // guarded by mu_
  size_t retained_units_ = 0;       // guarded by mu_
  uint64_t displaced_total_ = 0;    // guarded by mu_
  uint64_t checked_out_total_ = 0;  // guarded by mu_
  uint64_t reranked_total_ = 0;     // guarded by mu_
};

}  // namespace kvpool::master
