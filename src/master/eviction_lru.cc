#include "master/eviction_lru.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace kvpool::master {

EvictionLru::UnitId EvictionLru::NewUnitLocked() {
  UnitId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<UnitId>(units_.size());
    units_.emplace_back();
  }
  ++live_units_;
  return id;
}

void EvictionLru::FreeUnitLocked(UnitId id) {
  Unit& u = units_[id];
  EndRetentionLocked(u);
  const uint32_t generation = u.generation + 1;
  u = Unit{};
  u.generation = generation;  // a Candidate or pin end naming the old unit no longer matches
  free_ids_.push_back(id);
  --live_units_;
}

EvictionLru::TimeOrder& EvictionLru::OrderOf(Place place) {
  switch (place) {
    case Place::kUnpinned: return unpinned_;
    case Place::kRetained: return retained_;
    case Place::kPinned: return pinned_;
    default: return deferred_;
  }
}

void EvictionLru::LinkLocked(UnitId id, Place place, int64_t time_ms) {
  TimeOrder& order = OrderOf(place);
  // Most units are filed now, in the newest bucket: look there before searching the map.
  auto it = !order.empty() && std::prev(order.end())->first == time_ms
                ? std::prev(order.end())
                : order.try_emplace(time_ms, Bucket{time_ms}).first;
  Bucket& bucket = it->second;
  Unit& u = units_[id];
  u.place = place;
  u.bucket = &bucket;
  u.prev = bucket.tail;
  u.next = kNoUnit;
  if (bucket.tail != kNoUnit) {
    units_[bucket.tail].next = id;
  } else {
    bucket.head = id;
  }
  bucket.tail = id;
}

void EvictionLru::UnlinkLocked(UnitId id) {
  Unit& u = units_[id];
  Bucket* bucket = u.bucket;
  if (bucket == nullptr) return;
  if (u.prev != kNoUnit) {
    units_[u.prev].next = u.next;
  } else {
    bucket->head = u.next;
  }
  if (u.next != kNoUnit) {
    units_[u.next].prev = u.prev;
  } else {
    bucket->tail = u.prev;
  }
  if (bucket->head == kNoUnit) OrderOf(u.place).erase(bucket->time_ms);
  u.bucket = nullptr;
  u.prev = u.next = kNoUnit;
}

EvictionLru::Place EvictionLru::RankedPlace(const Unit& u, int64_t now_ms) {
  if (u.pin_until_ms > now_ms) return Place::kPinned;
  if (u.retain_until_ms > now_ms) return Place::kRetained;
  return Place::kUnpinned;
}

void EvictionLru::FileLocked(UnitId id, int64_t blocked_until_ms, int64_t now_ms) {
  Unit& u = units_[id];
  if (blocked_until_ms > now_ms) {
    LinkLocked(id, Place::kDeferred, blocked_until_ms);
    return;
  }
  switch (RankedPlace(u, now_ms)) {
    case Place::kPinned:
      LinkLocked(id, Place::kPinned, u.last_access_ms);
      pin_ends_.push({u.pin_until_ms, id, u.generation});
      break;
    case Place::kRetained:
      LinkLocked(id, Place::kRetained, -u.reuse_at_ms);
      pin_ends_.push({u.retain_until_ms, id, u.generation});
      break;
    default:
      LinkLocked(id, Place::kUnpinned, u.last_access_ms);
  }
}

int64_t EvictionLru::MaxPin(const GroupUnit& group) {
  int64_t pin = 0;
  for (const auto& [until, count] : group.pins) pin = std::max(pin, until);
  return pin;
}

EvictionLru::UnitId EvictionLru::AddObject(const std::string* key, uint64_t put_id,
                                           int64_t last_access_ms, int64_t pin_until_ms,
                                           int64_t blocked_until_ms, int64_t now_ms) {
  std::lock_guard lock(mu_);
  const UnitId id = NewUnitLocked();
  Unit& u = units_[id];
  u.name = key;
  u.put_id = put_id;
  u.last_access_ms = last_access_ms;
  u.pin_until_ms = pin_until_ms;
  FileLocked(id, blocked_until_ms, now_ms);
  return id;
}

EvictionLru::UnitId EvictionLru::JoinGroup(const std::string* group, int64_t last_access_ms,
                                           int64_t pin_until_ms, int64_t blocked_until_ms,
                                           int64_t now_ms) {
  std::lock_guard lock(mu_);
  GroupUnit& g = groups_[std::string_view(*group)];
  ++g.members;
  if (pin_until_ms > 0) {
    auto pin = std::find_if(g.pins.begin(), g.pins.end(),
                            [&](const auto& p) { return p.first == pin_until_ms; });
    if (pin != g.pins.end()) {
      ++pin->second;
    } else {
      g.pins.emplace_back(pin_until_ms, 1);
    }
  }
  if (g.unit == kNoUnit) {
    g.unit = NewUnitLocked();
    Unit& u = units_[g.unit];
    u.name = group;
    u.group = &g;
    u.last_access_ms = last_access_ms;
    u.pin_until_ms = pin_until_ms;
    FileLocked(g.unit, blocked_until_ms, now_ms);
    return g.unit;
  }
  Unit& u = units_[g.unit];
  u.last_access_ms = std::max(u.last_access_ms, last_access_ms);
  u.pin_until_ms = std::max(u.pin_until_ms, pin_until_ms);
  if (u.place == Place::kCheckedOut) return g.unit;  // the pass re-checks and gives it back
  // A deferred group stays aside until the later of its deferral and the new member's.
  if (u.place == Place::kDeferred) blocked_until_ms = std::max(blocked_until_ms, u.bucket->time_ms);
  UnlinkLocked(g.unit);
  FileLocked(g.unit, blocked_until_ms, now_ms);
  return g.unit;
}

void EvictionLru::Leave(UnitId id, int64_t pin_until_ms, int64_t now_ms) {
  std::lock_guard lock(mu_);
  Unit& u = units_[id];
  assert(u.place != Place::kFree);
  GroupUnit* g = u.group;
  if (g == nullptr) {
    UnlinkLocked(id);
    FreeUnitLocked(id);
    return;
  }
  if (pin_until_ms > 0) {
    auto pin = std::find_if(g->pins.begin(), g->pins.end(),
                            [&](const auto& p) { return p.first == pin_until_ms; });
    if (pin != g->pins.end() && --pin->second == 0) g->pins.erase(pin);
  }
  if (--g->members == 0) {
    auto group_it = groups_.find(std::string_view(*u.name));
    UnlinkLocked(id);
    FreeUnitLocked(id);
    groups_.erase(group_it);
    return;
  }
  u.pin_until_ms = MaxPin(*g);
  if (u.place == Place::kCheckedOut) return;
  // Ranked again: the pin may have left with the member, and so may the lease it was
  // deferred for (a later pass finds out; at worst it is deferred again).
  UnlinkLocked(id);
  FileLocked(id, 0, now_ms);
}

void EvictionLru::Touch(UnitId id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  TouchLocked(id, now_ms);
}

void EvictionLru::TouchAll(std::span<const UnitId> units, int64_t now_ms) {
  if (units.empty()) return;
  std::lock_guard lock(mu_);
  for (UnitId id : units) TouchLocked(id, now_ms);
}

void EvictionLru::TouchLocked(UnitId id, int64_t now_ms) {
  Unit& u = units_[id];
  assert(u.place != Place::kFree);
  // Only the recency changes: a unit is ranked again when it reaches the front of its place
  // (CheckOut), at most once however often it was read, and a read touches one unit, not its
  // neighbours.
  u.last_access_ms = std::max(u.last_access_ms, now_ms);
}

void EvictionLru::ReleaseDueLocked(int64_t now_ms) {
  // Deferrals that ended: the units go back to their ranked place (pins checked there).
  while (!deferred_.empty() && deferred_.begin()->first <= now_ms) {
    const UnitId id = deferred_.begin()->second.head;
    UnlinkLocked(id);
    FileLocked(id, 0, now_ms);
  }
  // Pins and retentions that ended: on to their next place (unpinned at the same recency).
  while (!pin_ends_.empty() && pin_ends_.top().pin_until_ms <= now_ms) {
    const PinEnd end = pin_ends_.top();
    pin_ends_.pop();
    Unit& u = units_[end.unit];
    if (u.generation != end.generation) continue;  // gone
    if (u.retained && u.retain_until_ms <= now_ms) EndRetentionLocked(u);
    if ((u.place != Place::kPinned && u.place != Place::kRetained) || RankedPlace(u, now_ms) == u.place) {
      continue;  // deferred or checked out (filed when it comes back), or still in place
    }
    UnlinkLocked(end.unit);
    FileLocked(end.unit, 0, now_ms);
  }
}

std::vector<EvictionLru::Candidate> EvictionLru::CheckOut(size_t max, int64_t now_ms) {
  std::lock_guard lock(mu_);
  ReleaseDueLocked(now_ms);
  std::vector<Candidate> out;
  while (out.size() < max) {
    TimeOrder& order = !unpinned_.empty() ? unpinned_ : !retained_.empty() ? retained_ : pinned_;
    if (order.empty()) break;
    const UnitId id = order.begin()->second.head;
    Unit& u = units_[id];
    // Retained units are ranked by the router's expectation, which a read does not change.
    const bool read_since_filed = u.place != Place::kRetained && u.last_access_ms > u.bucket->time_ms;
    UnlinkLocked(id);
    if (read_since_filed) {
      // Filed before its latest read: its place is further back. Every unit behind it was
      // filed no earlier, and a recency is never below its filing time, so a unit at the
      // front whose recency is its filing time is the least recent of all.
      FileLocked(id, 0, now_ms);
      ++reranked_total_;
      continue;
    }
    u.place = Place::kCheckedOut;
    Candidate& c = out.emplace_back();
    c.unit = id;
    c.generation = u.generation;
    c.is_group = u.group != nullptr;
    c.name = *u.name;
    c.put_id = u.put_id;
  }
  checked_out_total_ += out.size();
  return out;
}

void EvictionLru::GiveBack(const Candidate& candidate, int64_t blocked_until_ms, int64_t now_ms) {
  std::lock_guard lock(mu_);
  Unit& u = units_[candidate.unit];
  if (u.generation != candidate.generation || u.place != Place::kCheckedOut) return;
  FileLocked(candidate.unit, blocked_until_ms, now_ms);
}

void EvictionLru::EndRetentionLocked(Unit& u) {
  if (u.retained) --retained_units_;
  u.retained = false;
  u.retain_until_ms = 0;
}

bool EvictionLru::DisplaceFarthestLocked(int64_t reuse_at_ms, int64_t now_ms) {
  // Only units filed as retained compete: one deferred, checked out or pinned by its members
  // keeps its retention until it is filed again.
  if (retained_.empty()) return false;
  const UnitId farthest = retained_.begin()->second.head;
  Unit& f = units_[farthest];
  if (f.reuse_at_ms <= reuse_at_ms) return false;
  EndRetentionLocked(f);
  RankAgainLocked(farthest, now_ms);
  ++displaced_total_;
  return true;
}

bool EvictionLru::Retain(UnitId id, int64_t until_ms, int64_t reuse_at_ms, size_t max_retained, int64_t now_ms) {
  std::lock_guard lock(mu_);
  ReleaseDueLocked(now_ms);  // retentions that ended no longer count against the bound
  Unit& u = units_[id];
  assert(u.place != Place::kFree);
  if (!u.retained) {
    if (retained_units_ >= max_retained && !DisplaceFarthestLocked(reuse_at_ms, now_ms)) return false;
    u.retained = true;
    ++retained_units_;
  }
  u.retain_until_ms = until_ms;
  u.reuse_at_ms = reuse_at_ms;
  pin_ends_.push({until_ms, id, u.generation});  // ends the count, whatever else pins it
  RankAgainLocked(id, now_ms);
  return true;
}

void EvictionLru::Release(UnitId id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  Unit& u = units_[id];
  assert(u.place != Place::kFree);
  EndRetentionLocked(u);
  // Before every unit filed at a real time; a read or a member's put end makes it recent again.
  u.last_access_ms = std::numeric_limits<int64_t>::min() / 4;
  RankAgainLocked(id, now_ms);
}

void EvictionLru::RankAgainLocked(UnitId id, int64_t now_ms) {
  const Place place = units_[id].place;
  if (place != Place::kUnpinned && place != Place::kRetained && place != Place::kPinned) return;
  UnlinkLocked(id);
  FileLocked(id, 0, now_ms);
}

size_t EvictionLru::retained_units() const {
  std::lock_guard lock(mu_);
  return retained_units_;
}

size_t EvictionLru::unit_count() const {
  std::lock_guard lock(mu_);
  return live_units_;
}

uint64_t EvictionLru::displaced_retentions() const {
  std::lock_guard lock(mu_);
  return displaced_total_;
}

uint64_t EvictionLru::checked_out_total() const {
  std::lock_guard lock(mu_);
  return checked_out_total_;
}

uint64_t EvictionLru::reranked_total() const {
  std::lock_guard lock(mu_);
  return reranked_total_;
}

}  // namespace kvpool::master
