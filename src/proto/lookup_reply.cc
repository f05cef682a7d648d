#include "proto/lookup_reply.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvpool {

LookupReplyWriter::LookupReplyWriter(proto::BatchGetReplicasReply* reply, size_t keys) : reply_(reply) {
  const int n = static_cast<int>(keys);
  reply_->mutable_codes()->Reserve(n);
  reply_->mutable_lengths()->Reserve(n);
  reply_->mutable_checksums()->Reserve(n);
  reply_->mutable_replica_counts()->Reserve(n);
  reply_->mutable_replicas()->Reserve(2 * n);
}

void LookupReplyWriter::Miss(proto::Code code, std::string message, int64_t evicted_ms_ago) {
  if (evicted_ms_ago > 0 && !evicted_) {  // the first evicted key: the misses before it were not
    reply_->mutable_evicted_ms_ago()->Resize(static_cast<int>(misses_), 0);
    evicted_ = true;
  }
  if (evicted_) reply_->add_evicted_ms_ago(static_cast<uint64_t>(std::max<int64_t>(evicted_ms_ago, 0)));
  ++misses_;
  reply_->add_codes(code);
  reply_->add_messages(std::move(message));
}

void LookupReplyWriter::Hit(uint64_t length, uint64_t checksum, uint32_t replicas, bool on_ssd) {
  if (on_ssd && !flagged_) {  // the first key on SSD: the hits before it were not
    reply_->mutable_on_ssd()->assign(hits_, '\0');
    flagged_ = true;
  }
  if (flagged_) reply_->mutable_on_ssd()->push_back(on_ssd ? '\1' : '\0');
  ++hits_;
  reply_->add_codes(proto::OK);
  reply_->add_lengths(length);
  reply_->add_checksums(checksum);
  reply_->add_replica_counts(replicas);
}

void LookupReplyWriter::Replica(uint64_t segment_id, uint64_t offset) {
  reply_->add_replicas(segment_id);
  reply_->add_replicas(offset);
}

void LookupReplyWriter::Grant(const AccessGrant& grant) {
  uint8_t wire[AccessGrant::kWireSize];
  EncodeGrant(grant, wire);
  reply_->mutable_grants()->append(reinterpret_cast<const char*>(wire), sizeof(wire));
}

Result<std::vector<LookupEntry>> ReadLookupReply(const proto::BatchGetReplicasReply& reply, size_t keys) {
  const auto malformed = [&](std::string_view what) {
    return Internal(fmt::format("master answered BatchGetReplicas for {} keys with a malformed reply: {}",
                                keys, what));
  };
  if (static_cast<size_t>(reply.codes_size()) != keys) {
    return malformed(fmt::format("{} codes", reply.codes_size()));
  }
  size_t hits = 0;
  for (int code : reply.codes()) hits += code == proto::OK ? 1 : 0;
  if (static_cast<size_t>(reply.messages_size()) != keys - hits) {
    return malformed(fmt::format("{} messages for {} misses", reply.messages_size(), keys - hits));
  }
  if (static_cast<size_t>(reply.lengths_size()) != hits || static_cast<size_t>(reply.checksums_size()) != hits ||
      static_cast<size_t>(reply.replica_counts_size()) != hits) {
    return malformed(fmt::format("{} lengths, {} checksums and {} replica counts for {} hits", reply.lengths_size(),
                                 reply.checksums_size(), reply.replica_counts_size(), hits));
  }
  uint64_t words = 0;
  for (uint32_t count : reply.replica_counts()) {
    if (count == 0) return malformed("a hit without a replica");
    words += 2 * uint64_t{count};
  }
  if (words != static_cast<uint64_t>(reply.replicas_size())) {
    return malformed(fmt::format("{} replica words where the counts say {}", reply.replicas_size(), words));
  }
  if (reply.evicted_ms_ago_size() != 0 && static_cast<size_t>(reply.evicted_ms_ago_size()) != keys - hits) {
    return malformed(fmt::format("{} eviction ages for {} misses", reply.evicted_ms_ago_size(), keys - hits));
  }
  if (!reply.on_ssd().empty() && reply.on_ssd().size() != hits) {
    return malformed(fmt::format("{} SSD flags for {} hits", reply.on_ssd().size(), hits));
  }
  const size_t grant_bytes = static_cast<size_t>(words / 2) * AccessGrant::kWireSize;
  if (!reply.grants().empty() && reply.grants().size() != grant_bytes) {
    return malformed(fmt::format("{} bytes of grants for {} replicas", reply.grants().size(), words / 2));
  }
  std::vector<LookupEntry> out(keys);
  const std::span<const uint64_t> all(reply.replicas().data(), static_cast<size_t>(reply.replicas_size()));
  size_t miss = 0, hit = 0, word = 0;
  for (size_t i = 0; i < keys; ++i) {
    LookupEntry& e = out[i];
    e.code = static_cast<proto::Code>(reply.codes(static_cast<int>(i)));
    if (e.code != proto::OK) {
      if (reply.evicted_ms_ago_size() != 0 && e.code == proto::NOT_FOUND) {
        e.evicted_ms_ago = reply.evicted_ms_ago(static_cast<int>(miss));
      }
      e.message = reply.messages(static_cast<int>(miss++));
      continue;
    }
    const size_t n = 2 * size_t{reply.replica_counts(static_cast<int>(hit))};
    e.on_ssd = !reply.on_ssd().empty() && reply.on_ssd()[hit] != '\0';
    if (e.on_ssd && n != 2) return malformed("a key on SSD with more than one replica");
    e.checksum = reply.checksums(static_cast<int>(hit));
    e.length = reply.lengths(static_cast<int>(hit++));
    e.replica_words = all.subspan(word, n);
    if (!reply.grants().empty()) {
      e.grants = std::string_view(reply.grants()).substr(word / 2 * AccessGrant::kWireSize, n / 2 * AccessGrant::kWireSize);
    }
    word += n;
  }
  return out;
}

}  // namespace kvpool
