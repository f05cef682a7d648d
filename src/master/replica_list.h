// ReplicaList: the copies of one object. Almost every object has one, so that one is kept in
// place: no heap block per object, and a read finds it without another cache miss. Two or
// more live in a vector. A read-only view is contiguous (begin/end), like a vector's.
//
// Not copyable or movable as a whole (an ObjectMeta never moves inside its map node); its
// copies move in and out with Assign, push_back and Take.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "master/replica_placement.h"

namespace kvpool::master {

class ReplicaList {
 public:
  ReplicaList() {}
  ~ReplicaList() { clear(); }
  ReplicaList(const ReplicaList&) = delete;
  ReplicaList& operator=(const ReplicaList&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const PlacedReplica* begin() const { return size_ <= 1 ? &one_ : many_.data(); }
  const PlacedReplica* end() const { return begin() + size_; }

  void push_back(PlacedReplica replica) {
    if (size_ == 0) {
      new (&one_) PlacedReplica(std::move(replica));
    } else if (size_ == 1) {
      std::vector<PlacedReplica> many;
      many.reserve(2);
      many.push_back(std::move(one_));
      many.push_back(std::move(replica));
      one_.~PlacedReplica();
      new (&many_) std::vector<PlacedReplica>(std::move(many));
    } else {
      many_.push_back(std::move(replica));
    }
    ++size_;
  }

  // Replaces what the list holds with `replicas`.
  void Assign(std::vector<PlacedReplica>&& replicas) {
    clear();
    const size_t count = replicas.size();
    if (count == 1) {
      new (&one_) PlacedReplica(std::move(replicas[0]));
    } else if (count > 1) {
      new (&many_) std::vector<PlacedReplica>(std::move(replicas));
    }
    size_ = static_cast<uint32_t>(count);
  }

  // Moves every copy out; the list is empty after.
  std::vector<PlacedReplica> Take() {
    std::vector<PlacedReplica> out;
    if (size_ == 1) {
      out.push_back(std::move(one_));
    } else if (size_ > 1) {
      out = std::move(many_);
    }
    clear();
    return out;
  }

  // Drops the copies `pred` holds for; returns how many.
  template <typename Pred>
  size_t EraseIf(Pred pred) {
    bool any = false;
    for (const PlacedReplica& r : *this) any = any || pred(r);
    if (!any) return 0;  // the common case of a scan over every object: nothing moves
    std::vector<PlacedReplica> all = Take();
    const size_t dropped = std::erase_if(all, pred);
    Assign(std::move(all));
    return dropped;
  }

  void clear() {
    if (size_ == 1) {
      one_.~PlacedReplica();
    } else if (size_ > 1) {
      many_.~vector();
    }
    size_ = 0;
  }

 private:
  union {
    PlacedReplica one_;                // constructed iff size_ == 1
    std::vector<PlacedReplica> many_;  // constructed iff size_ >= 2
  };
  uint32_t size_ = 0;
};

}  // namespace kvpool::master
