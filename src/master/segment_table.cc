#include "master/segment_table.h"

#include <algorithm>
#include <mutex>

#include "common/clock.h"

namespace kvpool::master {

SegmentTable::SegmentTable(uint64_t alignment)
    : alignment_(alignment), next_id_(static_cast<uint64_t>(WallClockMs())) {}

std::shared_ptr<Segment> SegmentTable::MountWithId(SegmentInfo info, int64_t now_ms) {
  std::unique_lock lock(mu_);
  if (info.id == 0 || segments_.count(info.id) != 0) return nullptr;
  next_id_ = std::max(next_id_, info.id + 1);
  return InsertLocked(std::move(info), now_ms);
}

std::shared_ptr<Segment> SegmentTable::InsertLocked(SegmentInfo info, int64_t now_ms) {
  auto segment = std::make_shared<Segment>(std::move(info), alignment_);
  segments_.emplace(segment->id(), segment);
  store_last_seen_ms_[segment->info().store_id] = now_ms;
  return segment;
}

std::shared_ptr<Segment> SegmentTable::Mount(SegmentInfo info, int64_t now_ms) {
  std::unique_lock lock(mu_);
  info.id = next_id_++;
  return InsertLocked(std::move(info), now_ms);
}

std::shared_ptr<Segment> SegmentTable::Remove(uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = segments_.find(id);
  if (it == segments_.end()) return nullptr;
  auto segment = std::move(it->second);
  segments_.erase(it);
  segment->MarkDead();
  return segment;
}

std::shared_ptr<Segment> SegmentTable::Find(uint64_t id) const {
  std::shared_lock lock(mu_);
  auto it = segments_.find(id);
  return it == segments_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Segment>> SegmentTable::Snapshot() const {
  std::vector<std::shared_ptr<Segment>> out;
  {
    std::shared_lock lock(mu_);
    out.reserve(segments_.size());
    for (const auto& [id, segment] : segments_) out.push_back(segment);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  return out;
}

std::vector<uint64_t> SegmentTable::Heartbeat(const std::string& store_id,
                                              std::span<const uint64_t> segment_ids,
                                              int64_t now_ms) {
  std::vector<uint64_t> unknown;
  std::unique_lock lock(mu_);
  store_last_seen_ms_[store_id] = now_ms;
  for (uint64_t id : segment_ids) {
    auto it = segments_.find(id);
    if (it == segments_.end() || it->second->info().store_id != store_id) unknown.push_back(id);
  }
  return unknown;
}

std::vector<uint64_t> SegmentTable::TakeExpiredSegments(int64_t now_ms, uint64_t ttl_ms) {
  std::vector<uint64_t> expired;
  std::unique_lock lock(mu_);
  for (auto it = store_last_seen_ms_.begin(); it != store_last_seen_ms_.end();) {
    if (now_ms - it->second > static_cast<int64_t>(ttl_ms)) {
      for (const auto& [id, segment] : segments_) {
        if (segment->info().store_id == it->first) expired.push_back(id);
      }
      it = store_last_seen_ms_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(expired.begin(), expired.end());
  return expired;
}

void SegmentTable::ForgiveSilence(int64_t now_ms) {
  std::unique_lock lock(mu_);
  for (auto& [store, last_seen] : store_last_seen_ms_) last_seen = std::max(last_seen, now_ms);
}

uint64_t SegmentTable::capacity_bytes() const {
  std::shared_lock lock(mu_);
  uint64_t total = 0;
  for (const auto& [id, segment] : segments_) total += segment->capacity();
  return total;
}

uint64_t SegmentTable::used_bytes() const {
  std::shared_lock lock(mu_);
  uint64_t total = 0;
  for (const auto& [id, segment] : segments_) total += segment->used_bytes();
  return total;
}

}  // namespace kvpool::master
