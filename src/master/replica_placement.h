// Replica placement: which segments hold an object's copies, and where inside them.
//
// Copies of one object always land on distinct segments. Among segments with room, the
// choice is "power of two choices": sample two at random and take the one with more free
// bytes. That keeps segments evenly filled without scanning them all or keeping a global
// ordering that every allocation would contend on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "master/offset_allocator.h"
#include "master/segment.h"

namespace kvpool::master {

// One allocated copy. Holding the segment keeps its allocator alive, so freeing a copy is
// always safe, even after the segment was unmounted.
struct PlacedReplica {
  std::shared_ptr<Segment> segment;
  uint64_t offset = 0;
  OffsetAllocator::Handle handle = 0;
};

// Frees every copy in `replicas` back to its segment.
void FreeReplicas(std::span<const PlacedReplica> replicas);

// Allocates `size` bytes on each of `count` distinct live segments out of `segments`.
// NO_SPACE when there is not enough room right now (the caller may evict and retry); any
// copies already allocated are freed before returning an error.
Result<std::vector<PlacedReplica>> PlaceReplicas(
    std::span<const std::shared_ptr<Segment>> segments, uint64_t size, uint32_t count);

}  // namespace kvpool::master
