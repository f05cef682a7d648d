// Test-only (tests, and `kvpool store` built with KVPOOL_FAULT_HOOKS for scripts/soak.sh): a
// storage service whose memory went bad. Flips bits where values lie in a store's segment,
// without going through anything a reader would use: only the end-to-end checksum can tell
// the reader.
#pragma once

#include <string.h>

#include <cstddef>
#include <span>
#include <vector>

#include "store/storage_service.h"

namespace kvpool::store::testing {

// Flips one bit of `value` where it lies in the segment, found by its bytes (values in tests
// are random, so they are found once). False when it is not there.
inline bool FlipBitOfStoredValue(const StorageService& store, std::span<const std::byte> value) {
  const SegmentMemory& memory = store.memory();
  void* at = memmem(memory.base(), memory.size(), value.data(), value.size());
  if (at == nullptr || value.empty()) return false;
  static_cast<std::byte*>(at)[value.size() / 2] ^= std::byte{0x10};
  return true;
}

// Flips one bit in each of `objects` objects of the store's index, picked at random (a
// complete object may be picked twice); the bit lies anywhere in the object. Returns how many
// bits were flipped (fewer when the index holds no complete object).
template <typename Rng>
uint64_t FlipBitsOfRandomObjects(const StorageService& store, Rng& rng, uint64_t objects) {
  proto::MountSegmentRequest snapshot;
  store.index().Snapshot(&snapshot);
  std::vector<const proto::IndexEntry*> complete;
  for (const proto::IndexEntry& e : snapshot.entries()) {
    if (e.complete() && !e.removed() && e.length() > 0 && e.offset() + e.length() <= store.memory().size()) {
      complete.push_back(&e);
    }
  }
  if (complete.empty()) return 0;
  auto* bytes = static_cast<std::byte*>(store.memory().base());
  for (uint64_t i = 0; i < objects; ++i) {
    const proto::IndexEntry& e = *complete[rng() % complete.size()];
    bytes[e.offset() + rng() % e.length()] ^= std::byte{static_cast<uint8_t>(1u << (rng() % 8))};
  }
  return objects;
}

// Flips one bit in every `stride` bytes of the store's segment: every object it holds goes bad.
inline void FlipBitsAcrossTheSegment(const StorageService& store, uint64_t stride = 4096) {
  const SegmentMemory& memory = store.memory();
  auto* bytes = static_cast<std::byte*>(memory.base());
  for (uint64_t at = stride / 2; at < memory.size(); at += stride) bytes[at] ^= std::byte{0x10};
}

}  // namespace kvpool::store::testing
