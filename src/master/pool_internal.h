// Small pieces the files of PoolMetadata (pool_metadata.cc, pool_eviction.cc, pool_rejoin.cc,
// pool_tiering.cc) share: the journal records they append for the stores, and how an object's
// copies are shown to clients. Not for use outside them.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "master/object_index.h"
#include "master/pool_metadata.h"
#include "proto/master.pb.h"

namespace kvpool::master::internal {

inline std::vector<ReplicaView> ViewsOf(const ObjectMeta& meta) {
  std::vector<ReplicaView> views;
  views.reserve(meta.replicas.size());
  for (const auto& replica : meta.replicas) views.push_back({replica.segment->id(), replica.offset, meta.length});
  return views;
}

// Collects each distinct segment once; batches reference few segments, so a linear scan wins.
inline void NoteSegments(std::span<const PlacedReplica> replicas, std::vector<std::shared_ptr<Segment>>* seen) {
  for (const auto& replica : replicas) {
    bool known = false;
    for (const auto& s : *seen) known = known || s.get() == replica.segment.get();
    if (!known) seen->push_back(replica.segment);
  }
}

// A lookup's answer for a found object: its length, checksum and copies (whose segments go to
// `referenced`, for the reply to name them).
inline void AnswerWith(const ObjectMeta& meta, GetResult& result, std::vector<std::shared_ptr<Segment>>* referenced) {
  result.length = meta.length;
  result.checksum = meta.checksum;
  result.replicas = ViewsOf(meta);
  NoteSegments(meta.replicas, referenced);
}

// A record naming an entry of the store's index by where it is and which put placed it.
inline proto::IndexRecord RecordOf(proto::IndexRecord::Op op, uint64_t offset, uint64_t put_id) {
  proto::IndexRecord record;
  record.set_op(op);
  record.mutable_entry()->set_offset(offset);
  record.mutable_entry()->set_put_id(put_id);
  return record;
}

// A record carrying the object's entry (key, where, length, checksum, put, group): a PLACE, or
// what a store needs to move the object between its segment and its SSD tier.
inline proto::IndexRecord EntryRecord(proto::IndexRecord::Op op, const std::string& key, const ObjectMeta& meta,
                                      uint64_t offset) {
  proto::IndexRecord record = RecordOf(op, offset, meta.put_id);
  proto::IndexEntry* entry = record.mutable_entry();
  entry->set_key(key);
  entry->set_length(meta.length);
  entry->set_checksum(meta.checksum);
  if (meta.group) entry->set_group(*meta.group);
  return record;
}

// Removes `key` from the store's SSD tier.
inline proto::IndexRecord DropSsdRecord(const std::string& key, uint64_t put_id) {
  proto::IndexRecord record = RecordOf(proto::IndexRecord::DROP_SSD, 0, put_id);
  record.mutable_entry()->set_key(key);
  return record;
}

inline proto::IndexRecord TouchSsdRecord(const std::string& key) {
  proto::IndexRecord record;
  record.set_op(proto::IndexRecord::TOUCH_SSD);
  record.mutable_entry()->set_key(key);
  return record;
}

}  // namespace kvpool::master::internal
