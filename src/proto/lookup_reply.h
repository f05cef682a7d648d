// The flat form of a BatchGetReplicas answer (master.proto): the master writes it one key at a
// time with LookupReplyWriter; a client reads it back with ReadLookupReply, which checks that
// the arrays agree with each other and with the keys asked for before anything indexes them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/access_grant.h"
#include "common/status.h"
#include "proto/master.pb.h"

namespace kvpool {

class LookupReplyWriter {
 public:
  LookupReplyWriter(proto::BatchGetReplicasReply* reply, size_t keys);

  // The next key is not served. `evicted_ms_ago` (NOT_FOUND): how long ago the master evicted
  // it, 0 when it has no record.
  void Miss(proto::Code code, std::string message, int64_t evicted_ms_ago = 0);
  // The next key is served from `replicas` (>= 1) copies, each added with Replica();
  // `checksum` is its writer's (common/checksum.h). `on_ssd`: its one replica is in its
  // store's SSD tier, and the replica's offset is into the tier's file.
  void Hit(uint64_t length, uint64_t checksum, uint32_t replicas, bool on_ssd = false);
  void Replica(uint64_t segment_id, uint64_t offset);
  // The read grant of the replica just added; a tenant's answer has one for every replica.
  void Grant(const AccessGrant& grant);

 private:
  proto::BatchGetReplicasReply* reply_;
  size_t hits_ = 0;       // so far, for the on_ssd bytes
  bool flagged_ = false;  // a key on SSD was written: every hit from then on has its byte
  size_t misses_ = 0;     // so far, for evicted_ms_ago
  bool evicted_ = false;  // a key evicted was written: every miss from then on has its age
};

// One key's answer; views into the reply it was read from.
struct LookupEntry {
  proto::Code code = proto::OK;
  std::string_view message;             // code != OK
  uint64_t evicted_ms_ago = 0;          // code == NOT_FOUND: how long ago the master evicted it; 0: no record
  uint64_t length = 0;                  // code == OK
  uint64_t checksum = 0;                // code == OK: the writer's checksum of the value
  std::span<const uint64_t> replica_words;  // code == OK: (segment_id, offset) pairs
  std::string_view grants;                  // code == OK, to a tenant: a grant per replica; else empty
  bool on_ssd = false;  // code == OK: the one replica is in its store's SSD tier (offset: in its file)

  size_t replicas() const { return replica_words.size() / 2; }
  uint64_t segment_id(size_t r) const { return replica_words[2 * r]; }
  uint64_t offset(size_t r) const { return replica_words[2 * r + 1]; }
  AccessGrant grant(size_t r) const {
    if (grants.empty()) return {};
    return DecodeGrant(reinterpret_cast<const uint8_t*>(grants.data()) + r * AccessGrant::kWireSize);
  }
};

// One entry per key, in request order; an Internal error when the reply does not describe
// exactly `keys` keys.
Result<std::vector<LookupEntry>> ReadLookupReply(const proto::BatchGetReplicasReply& reply, size_t keys);

}  // namespace kvpool
