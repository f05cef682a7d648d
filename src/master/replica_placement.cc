#include "master/replica_placement.h"

#include <fmt/format.h>

#include <functional>
#include <thread>

namespace kvpool::master {

namespace {

// Per-thread xorshift: placement must not serialise threads on a shared generator.
uint64_t NextRandom() {
  thread_local uint64_t state =
      std::hash<std::thread::id>{}(std::this_thread::get_id()) | 0x9E3779B97F4A7C15ull;
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

}  // namespace

void FreeReplicas(std::span<const PlacedReplica> replicas) {
  for (const auto& replica : replicas) replica.segment->Free(replica.handle);
}

Result<std::vector<PlacedReplica>> PlaceReplicas(
    std::span<const std::shared_ptr<Segment>> segments, uint64_t size, uint32_t count) {
  // Segments that might fit the object; pruned as allocations on them fail.
  thread_local std::vector<size_t> candidates;  // indices into `segments`
  candidates.clear();
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i]->alive() && segments[i]->free_bytes() >= size) candidates.push_back(i);
  }

  std::vector<PlacedReplica> placed;
  placed.reserve(count);
  while (placed.size() < count) {
    if (candidates.empty()) {
      FreeReplicas(placed);
      return NoSpace(fmt::format("no room for {} copies of {} bytes", count, size));
    }
    size_t pick = NextRandom() % candidates.size();
    if (candidates.size() > 1) {
      size_t other = NextRandom() % (candidates.size() - 1);
      if (other >= pick) ++other;
      if (segments[candidates[other]]->free_bytes() > segments[candidates[pick]]->free_bytes()) {
        pick = other;
      }
    }
    const std::shared_ptr<Segment>& segment = segments[candidates[pick]];
    auto allocation = segment->Allocate(size);
    // Either way this segment is done: it holds a copy now or has no block big enough.
    candidates[pick] = candidates.back();
    candidates.pop_back();
    if (!allocation) continue;
    placed.push_back(PlacedReplica{segment, allocation->offset, allocation->handle});
  }
  return placed;
}

}  // namespace kvpool::master
