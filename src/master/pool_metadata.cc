#include "master/pool_metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "master/journal_waits.h"
#include "master/pool_internal.h"

namespace kvpool::master {

using internal::EntryRecord;
using internal::NoteSegments;
using internal::RecordOf;
using internal::ViewsOf;

namespace {

// A few rounds of "allocate, evict, retry": eviction frees bytes in LRU order, which may
// leave them fragmented across segments, so one pass is not always enough.
constexpr int kMaxEvictionRounds = 8;

// Keys may be binary; messages show a printable, bounded prefix.
std::string QuoteKey(std::string_view key) {
  constexpr size_t kMaxShown = 64;
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += key.size() > kMaxShown ? "'..." : "'";
  return out;
}

bool OnAny(const std::vector<ReplicaView>& replicas, const std::unordered_set<uint64_t>& segments) {
  return std::any_of(replicas.begin(), replicas.end(),
                     [&](const ReplicaView& r) { return segments.count(r.segment_id) != 0; });
}

// Hashes each key once and visits the keys shard by shard, so a batch of thousands takes each
// shard lock once instead of once per key: visit(shard, hashed, indices) runs with the shard
// locked, `indices` the positions in `keys` (and `hashed`) of the keys it holds.
template <typename Visit>
void VisitByShard(const ObjectIndex& index, std::span<const std::string_view> keys, Visit visit) {
  const size_t shard_count = index.shard_count();
  thread_local std::vector<HashedKey> hashed;
  thread_local std::vector<uint32_t> shard_of, order, shard_begin, fill;
  hashed.resize(keys.size());
  shard_of.resize(keys.size());
  order.resize(keys.size());
  shard_begin.assign(shard_count + 1, 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    hashed[i] = ObjectIndex::Hash(keys[i]);
    shard_of[i] = static_cast<uint32_t>(index.ShardOf(hashed[i]));
    ++shard_begin[shard_of[i] + 1];
  }
  for (size_t s = 0; s < shard_count; ++s) shard_begin[s + 1] += shard_begin[s];
  fill.assign(shard_begin.begin(), shard_begin.end() - 1);
  for (size_t i = 0; i < keys.size(); ++i) order[fill[shard_of[i]]++] = static_cast<uint32_t>(i);
  for (size_t s = 0; s < shard_count; ++s) {
    if (shard_begin[s] == shard_begin[s + 1]) continue;
    ObjectShard& shard = index.shard(s);
    std::lock_guard lock(shard.mu);
    visit(shard, std::span<const HashedKey>(hashed),
          std::span<const uint32_t>(order).subspan(shard_begin[s], shard_begin[s + 1] - shard_begin[s]));
  }
}

std::vector<SegmentInfo> InfosOf(const std::vector<std::shared_ptr<Segment>>& segments) {
  std::vector<SegmentInfo> infos;
  infos.reserve(segments.size());
  for (const auto& s : segments) infos.push_back(s->info());
  return infos;
}

}  // namespace

PoolMetadata::PoolMetadata(PoolOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      segments_(options_.alignment),
      index_(options_.shards),
      groups_(options_.shards),
      evicted_keys_(options_.remembered_evictions),
      quotas_(options_.quotas) {
  // Put ids stay above those of an earlier master whose objects a store may bring back:
  // the wall clock at start, with room for 2^20 puts per millisecond since.
  next_put_id_ = static_cast<uint64_t>(WallClockMs()) << 20;
}

int64_t PoolMetadata::UnixMs(int64_t clock_ms) const {
  return WallClockMs() + (clock_ms - clock_->NowMs());
}

int64_t PoolMetadata::ClockMs(int64_t unix_ms) const {
  return clock_->NowMs() + (unix_ms - WallClockMs());
}

uint64_t PoolMetadata::Journal(const PlacedReplica& replica, proto::IndexRecord record) {
  SegmentJournal* journal = replica.segment->journal();
  return journal ? journal->Append(std::move(record)) : 0;
}

void PoolMetadata::DropAndFree(const std::vector<PlacedReplica>& replicas, uint64_t put_id) {
  for (const auto& replica : replicas) {
    Journal(replica, RecordOf(proto::IndexRecord::DROP, replica.offset, put_id));
  }
  FreeReplicas(replicas);
}

void PoolMetadata::ExtendLeaseHorizons(int64_t now_ms) {
  const int64_t lease = static_cast<int64_t>(options_.default_lease_ms);
  const int64_t needed = UnixMs(now_ms + lease + 2000);
  const int64_t target = UnixMs(now_ms + 2 * lease + 2000);
  for (const auto& segment : segments_.Snapshot()) {
    if (segment->journal()) segment->journal()->PromiseLeaseHorizon(needed, target);
  }
}

void PoolMetadata::ForgiveStoreSilence() { segments_.ForgiveSilence(clock_->NowMs()); }

bool PoolMetadata::WaitIndexSynced(std::chrono::steady_clock::time_point deadline) {
  bool synced = true;
  for (const auto& segment : segments_.Snapshot()) {
    SegmentJournal* journal = segment->journal();
    if (journal && !journal->broken() && !journal->WaitConfirmed(journal->last_seq(), deadline)) synced = false;
  }
  return synced;
}

// ---- segments ----

Result<SegmentInfo> PoolMetadata::MountSegment(SegmentInfo info) {
  if (info.store_id.empty()) {
    return InvalidArgument("MountSegment: store_id is empty; heartbeats are keyed by it");
  }
  if (info.size < options_.alignment) {
    return InvalidArgument(fmt::format("MountSegment: segment size {} is below the {}-byte "
                                       "allocation alignment",
                                       info.size, options_.alignment));
  }
  auto segment = segments_.Mount(std::move(info), clock_->NowMs());
  return segment->info();
}

Status PoolMetadata::UnmountSegment(uint64_t segment_id) {
  auto segment = segments_.Remove(segment_id);
  if (!segment) return NotFound(fmt::format("segment {} is not mounted", segment_id));
  DropSegmentReplicas(*segment);
  return Status::Ok();
}

std::vector<uint64_t> PoolMetadata::Heartbeat(const std::string& store_id,
                                              std::span<const uint64_t> segment_ids) {
  return segments_.Heartbeat(store_id, segment_ids, clock_->NowMs());
}

void PoolMetadata::DropSegmentReplicas(const Segment& segment) {
  const int64_t now = clock_->NowMs();
  for (size_t i = 0; i < index_.shard_count(); ++i) {
    ObjectShard& shard = index_.shard(i);
    std::lock_guard lock(shard.mu);
    for (auto it = shard.objects.begin(); it != shard.objects.end();) {
      auto& replicas = it->second.replicas;
      const bool lost_some = replicas.EraseIf([&](const PlacedReplica& r) {
        return r.segment.get() == &segment;
      }) > 0;
      // A placeholder of a put still allocating has no copies yet; it is not lost.
      if (lost_some && replicas.empty()) {
        ForgetLocked(it->first, it->second, now);
        it = shard.objects.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// ---- validation ----

Status PoolMetadata::ValidateKey(std::string_view key) const {
  if (key.empty()) return InvalidArgument("key is empty");
  if (key.size() > options_.max_key_bytes) {
    return InvalidArgument(fmt::format("key {} is {} bytes; the limit is {} (max_key_bytes)",
                                       QuoteKey(key), key.size(), options_.max_key_bytes));
  }
  return Status::Ok();
}

Status PoolMetadata::ValidatePut(const PutStartItem& item) const {
  KVPOOL_RETURN_IF_ERROR(ValidateKey(item.key));
  if (item.length == 0) {
    return InvalidArgument(fmt::format("key {}: length is 0; values hold at least one byte",
                                       QuoteKey(item.key)));
  }
  if (item.length > options_.max_value_bytes) {
    return InvalidArgument(fmt::format("key {}: length {} exceeds the {}-byte value limit",
                                       QuoteKey(item.key), item.length,
                                       options_.max_value_bytes));
  }
  return Status::Ok();
}

// ---- puts ----

BatchPutStartResult PoolMetadata::BatchPutStart(std::span<const PutStartItem> items,
                                                const PutOptions& options) {
  const int64_t now = clock_->NowMs();
  const uint32_t copies = std::max<uint32_t>(1, options.replicas);
  BatchPutStartResult out;
  out.results.resize(items.size());
  std::vector<uint64_t> put_ids(items.size(), 0);

  // Phase 1: validate and reserve each key with a pending placeholder, so a concurrent put
  // of the same key fails ALREADY_EXISTS while this one allocates without holding locks.
  auto segments = segments_.Snapshot();
  uint64_t largest_segment = 0;
  for (const auto& s : segments) largest_segment = std::max(largest_segment, s->capacity());
  for (size_t i = 0; i < items.size(); ++i) {
    const PutStartItem& item = items[i];
    Status status = ValidatePut(item);
    if (status.ok() && segments.empty()) {
      status = Unavailable("no segments are mounted; start a storage service");
    }
    if (status.ok()) {
      size_t large_enough = 0;
      for (const auto& s : segments) large_enough += s->capacity() >= item.length ? 1 : 0;
      if (large_enough == 0) {
        status = NoSpace(fmt::format(
            "key {}: value of {} bytes is larger than every segment (largest is {} bytes)",
            QuoteKey(item.key), item.length, largest_segment));
      } else if (large_enough < copies) {
        status = NoSpace(fmt::format(
            "key {}: {} copies of {} bytes need {} distinct segments that large; {} mounted",
            QuoteKey(item.key), copies, item.length, copies, large_enough));
      }
    }
    const std::string_view group = item.group.empty() ? std::string_view(options.group) : item.group;
    if (status.ok()) {
      // A group is evicted whole: one that spans namespaces would let one namespace's quota
      // evict another's objects.
      const std::string_view key_ns = NamespaceOf(item.key), group_ns = NamespaceOf(group);
      if (!group.empty() && key_ns != group_ns && (quotas_.QuotaOf(key_ns) > 0 || quotas_.QuotaOf(group_ns) > 0)) {
        status = InvalidArgument(fmt::format(
            "key {} of namespace \"{}\" cannot join group {} of namespace \"{}\": with quotas, a group holds one "
            "namespace's objects",
            QuoteKey(item.key), key_ns, QuoteKey(group), group_ns));
      }
    }
    if (status.ok()) status = ChargeQuota(item.key, item.length);
    if (status.ok()) {
      ObjectShard& shard = index_.shard(index_.ShardOf(item.key));
      std::lock_guard lock(shard.mu);
      auto [it, inserted] = shard.objects.try_emplace(std::string(item.key));
      if (!inserted) {
        quotas_.Release(NamespaceOf(item.key), item.length);  // charged above, for an object that is not added
        status = AlreadyExists(
            fmt::format("key {} already exists (objects are immutable)", QuoteKey(item.key)));
      } else {
        ObjectMeta& meta = it->second;
        meta.length = item.length;
        meta.checksum = item.checksum;
        meta.state = ObjectState::kPending;
        meta.put_id = next_put_id_.fetch_add(1, std::memory_order_relaxed);
        meta.put_started_ms = now;
        meta.pin_until_ms = options.pin_ttl_ms > 0 ? now + static_cast<int64_t>(options.pin_ttl_ms) : 0;
        shard.pending.push_back({it->first, meta.put_id, now});
        if (!group.empty()) meta.group = groups_.Add(group, it->first, meta.put_id);
        put_ids[i] = meta.put_id;
      }
    }
    out.results[i].status = std::move(status);
  }

  // Phase 2: allocate (evicting if needed) and attach the copies to the placeholder.
  std::vector<std::shared_ptr<Segment>> referenced;
  JournalWaits waits;
  for (size_t i = 0; i < items.size(); ++i) {
    if (put_ids[i] == 0) continue;
    const PutStartItem& item = items[i];
    auto placed = AllocateWithEviction(item.length, copies, &segments);
    if (!placed.ok()) {
      AbandonPut(item.key, put_ids[i]);
      out.results[i].status = placed.status();
      continue;
    }
    Status status;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(item.key));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(item.key);
      if (it == shard.objects.end() || it->second.put_id != put_ids[i]) {
        status = Unavailable(fmt::format("put of key {} was dropped while allocating (its "
                                         "segment went away)",
                                         QuoteKey(item.key)));
      } else {
        // A segment checked alive under the shard lock will have this object's copy dropped
        // by any later unmount, because the unmount scan needs this lock too.
        for (const auto& replica : *placed) {
          if (!replica.segment->alive()) {
            status = Unavailable(fmt::format("segment {} was unmounted during the put of {}",
                                             replica.segment->id(), QuoteKey(item.key)));
          }
        }
        if (status.ok()) {
          ObjectMeta& meta = it->second;
          meta.replicas.Assign(std::move(*placed));
          out.results[i].replicas = ViewsOf(meta);
          NoteSegments(meta.replicas, &referenced);
          for (const auto& replica : meta.replicas) {
            proto::IndexRecord record = EntryRecord(proto::IndexRecord::PLACE, it->first, meta, replica.offset);
            proto::IndexEntry* entry = record.mutable_entry();
            entry->set_pin_until_unix_ms(meta.pin_until_ms > 0 ? UnixMs(meta.pin_until_ms) : 0);
            entry->set_put_started_unix_ms(UnixMs(meta.put_started_ms));
            waits.Note(replica.segment, Journal(replica, std::move(record)));
          }
        }
      }
    }
    if (!status.ok()) {
      FreeReplicas(*placed);
      AbandonPut(item.key, put_ids[i]);
      out.results[i].status = std::move(status);
    }
  }
  // Phase 3: a client may write only where its store's index says the put is (invariant 8).
  if (!waits.empty()) {
    const auto failed = waits.Wait(std::chrono::milliseconds(options_.index_sync_timeout_ms));
    for (size_t i = 0; i < items.size() && !failed.empty(); ++i) {
      if (!OnAny(out.results[i].replicas, failed)) continue;
      AbandonPut(items[i].key, put_ids[i]);
      out.results[i].replicas.clear();
      out.results[i].status = Unavailable(fmt::format(
          "key {}: a store did not confirm the placement within {} ms (stalled or gone)",
          QuoteKey(items[i].key), options_.index_sync_timeout_ms));
    }
  }
  out.segments = InfosOf(referenced);
  return out;
}

Result<std::vector<PlacedReplica>> PoolMetadata::AllocateWithEviction(
    uint64_t length, uint32_t copies, std::vector<std::shared_ptr<Segment>>* segments) {
  for (int round = 0;; ++round) {
    const uint64_t passes_seen = eviction_passes_.load(std::memory_order_acquire);
    auto placed = PlaceReplicas(*segments, length, copies);
    if (placed.ok()) return placed;

    std::lock_guard lock(eviction_mu_);
    *segments = segments_.Snapshot();  // segments may have come or gone meanwhile
    // Another thread evicted since we looked: try its freed space before evicting more.
    if (eviction_passes_.load(std::memory_order_acquire) != passes_seen &&
        round < kMaxEvictionRounds) {
      continue;
    }
    const uint64_t capacity = segments_.capacity_bytes();
    const uint64_t want = std::max<uint64_t>(
        static_cast<uint64_t>(options_.evict_fraction * static_cast<double>(capacity)),
        length * copies);
    const uint64_t freed = EvictLocked(want, clock_->NowMs());
    if (freed == 0 || round >= kMaxEvictionRounds) {
      placed = PlaceReplicas(*segments, length, copies);
      if (placed.ok()) return placed;
      return NoSpace(fmt::format(
          "pool is full: no room for {} cop{} of {} bytes and eviction could not free enough "
          "(what is left is leased, pending, or too fragmented)",
          copies, copies == 1 ? "y" : "ies", length));
    }
  }
}

Status PoolMetadata::ChargeQuota(std::string_view key, uint64_t length) {
  const std::string_view ns = NamespaceOf(key);
  const uint64_t quota = quotas_.QuotaOf(ns);
  if (quota > 0 && length > quota) {
    return NoSpace(fmt::format("key {}: a value of {} bytes is larger than namespace \"{}\"'s quota of {} bytes",
                               QuoteKey(key), length, ns, quota));
  }
  for (int round = 0;; ++round) {
    if (quotas_.TryCharge(ns, length)) return Status::Ok();
    uint64_t freed = 0;
    {
      std::lock_guard lock(eviction_mu_);
      const uint64_t want =
          std::max<uint64_t>(static_cast<uint64_t>(options_.evict_fraction * static_cast<double>(quota)), length);
      freed = EvictLocked(want, clock_->NowMs(), ns);
    }
    if (freed == 0 || round >= kMaxEvictionRounds) {
      return NoSpace(fmt::format(
          "key {}: namespace \"{}\" is at its quota ({} of {} bytes used) and none of its objects could be "
          "evicted (what it holds is leased or pending)",
          QuoteKey(key), ns, quotas_.UsedBy(ns), quota));
    }
  }
}

std::vector<PlacedReplica> PoolMetadata::EraseLocked(ObjectShard& shard, std::string_view key,
                                                     proto::IndexRecord::Op op) {
  auto it = shard.objects.find(key);
  if (it == shard.objects.end()) return {};
  std::vector<PlacedReplica> replicas = it->second.replicas.Take();
  if (it->second.tier == ObjectTier::kSsd) {
    // Its one copy holds no segment bytes: the store drops the key from its SSD tier.
    for (const auto& replica : replicas) {
      Journal(replica, internal::DropSsdRecord(it->first, it->second.put_id));
      replica.segment->AddSsdObject(-static_cast<int64_t>(it->second.length), -1);
    }
    replicas.clear();
  }
  for (const auto& replica : replicas) {
    Journal(replica, RecordOf(op, replica.offset, it->second.put_id));
  }
  ForgetLocked(it->first, it->second, clock_->NowMs());
  shard.objects.erase(it);
  return replicas;
}

void PoolMetadata::ForgetLocked(const std::string& key, ObjectMeta& meta, int64_t now_ms) {
  // Every object leaves the index through here: what its put (or rejoin) charged goes back.
  quotas_.Release(NamespaceOf(key), meta.length);
  if (meta.tier == ObjectTier::kDemoting) demoting_bytes_.fetch_sub(meta.length, std::memory_order_relaxed);
  meta.tier = ObjectTier::kDram;
  // Out of the eviction order first: a group's unit may point at the registry's name.
  if (meta.lru_unit != EvictionLru::kNoUnit) lru_.Leave(meta.lru_unit, meta.pin_until_ms, now_ms);
  meta.lru_unit = EvictionLru::kNoUnit;
  if (meta.group) groups_.Remove(*meta.group, key, meta.put_id);
  meta.group = nullptr;
}

void PoolMetadata::EnterEvictionOrderLocked(const std::string& key, ObjectMeta& meta,
                                            int64_t last_access_ms, int64_t blocked_until_ms,
                                            int64_t now_ms) {
  meta.lru_unit = meta.group ? lru_.JoinGroup(meta.group, last_access_ms, meta.pin_until_ms,
                                              blocked_until_ms, now_ms)
                             : lru_.AddObject(&key, meta.put_id, last_access_ms,
                                              meta.pin_until_ms, blocked_until_ms, now_ms);
}

void PoolMetadata::AbandonPut(std::string_view key, uint64_t put_id) {
  std::vector<PlacedReplica> replicas;
  {
    ObjectShard& shard = index_.shard(index_.ShardOf(key));
    std::lock_guard lock(shard.mu);
    auto it = shard.objects.find(key);
    if (it == shard.objects.end() || it->second.put_id != put_id ||
        it->second.state != ObjectState::kPending) {
      return;
    }
    replicas = EraseLocked(shard, key);
  }
  FreeReplicas(replicas);
}

std::vector<Status> PoolMetadata::BatchPutEnd(std::span<const std::string_view> keys) {
  const int64_t now = clock_->NowMs();
  std::vector<Status> out(keys.size());
  JournalWaits waits;
  std::vector<std::vector<ReplicaView>> committed(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string_view key = keys[i];
    if (Status status = ValidateKey(key); !status.ok()) {
      out[i] = std::move(status);
      continue;
    }
    std::vector<PlacedReplica> reclaimed;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(key));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(key);
      if (it == shard.objects.end()) {
        out[i] = NotFound(fmt::format("no pending put for key {} (revoked, timed out, or its "
                                      "segment was dropped)",
                                      QuoteKey(key)));
      } else if (it->second.state == ObjectState::kComplete) {
        out[i] = AlreadyExists(fmt::format("put of key {} already ended", QuoteKey(key)));
      } else if (now - it->second.put_started_ms >=
                 static_cast<int64_t>(options_.put_timeout_ms)) {
        // Past the deadline the space may be reclaimed at any moment; never publish it.
        reclaimed = EraseLocked(shard, key);
        out[i] = Timeout(fmt::format("put of key {} ended after put_timeout_ms ({} ms)",
                                     QuoteKey(key), options_.put_timeout_ms));
      } else {
        it->second.state = ObjectState::kComplete;
        EnterEvictionOrderLocked(it->first, it->second, now, 0, now);
        for (const auto& replica : it->second.replicas) {
          waits.Note(replica.segment, Journal(replica, RecordOf(proto::IndexRecord::COMMIT,
                                                                replica.offset, it->second.put_id)));
        }
        committed[i] = ViewsOf(it->second);
      }
    }
    FreeReplicas(reclaimed);
  }
  // The put has ended for the client only once a store's index says so (invariant 8).
  if (!waits.empty()) {
    const auto failed = waits.Wait(std::chrono::milliseconds(options_.index_sync_timeout_ms));
    for (size_t i = 0; i < keys.size() && !failed.empty(); ++i) {
      if (!OnAny(committed[i], failed)) continue;
      out[i] = Unavailable(fmt::format(
          "key {} is complete on this master, but a store did not confirm it within {} ms; it "
          "would not survive a master failover",
          QuoteKey(keys[i]), options_.index_sync_timeout_ms));
    }
  }
  return out;
}

std::vector<Status> PoolMetadata::BatchPutRevoke(std::span<const std::string_view> keys) {
  std::vector<Status> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string_view key = keys[i];
    if (Status status = ValidateKey(key); !status.ok()) {
      out[i] = std::move(status);
      continue;
    }
    std::vector<PlacedReplica> freed;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(key));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(key);
      if (it == shard.objects.end()) {
        out[i] = NotFound(fmt::format("no pending put for key {}", QuoteKey(key)));
      } else if (it->second.state == ObjectState::kComplete) {
        out[i] = AlreadyExists(fmt::format(
            "key {} is complete; revoke only cancels a pending put (use Remove)", QuoteKey(key)));
      } else {
        freed = EraseLocked(shard, key);
      }
    }
    FreeReplicas(freed);
  }
  return out;
}

// ---- reads ----

BatchGetResult PoolMetadata::BatchGetReplicas(std::span<const std::string_view> keys,
                                              uint64_t lease_ms) {
  const int64_t now = clock_->NowMs();
  BatchGetResult out;
  out.lease_ms = std::min(lease_ms == 0 ? options_.default_lease_ms : lease_ms,
                          options_.max_lease_ms);
  int64_t lease_until = now + static_cast<int64_t>(out.lease_ms);
  out.results.resize(keys.size());
  std::vector<std::shared_ptr<Segment>> referenced;
  std::vector<bool> invalid(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (Status status = ValidateKey(keys[i]); !status.ok()) {
      out.results[i].status = std::move(status);
      invalid[i] = true;
    }
  }
  thread_local std::vector<EvictionLru::UnitId> touched;
  std::vector<SsdRead> ssd_reads;
  std::vector<NamespaceHits::Outcome> outcomes(keys.size(), NamespaceHits::Outcome::kSkipped);
  VisitByShard(index_, keys, [&](ObjectShard& shard, std::span<const HashedKey> hashed,
                                 std::span<const uint32_t> indices) {
    touched.clear();
    for (uint32_t i : indices) {
      if (invalid[i]) continue;
      GetResult& result = out.results[i];
      auto it = shard.objects.find(hashed[i]);
      if (it == shard.objects.end()) {
        ++shard.misses;
        outcomes[i] = NamespaceHits::Outcome::kMiss;
        result.status = NotFound(fmt::format("key {} is not in the pool", QuoteKey(keys[i])));
        if (const std::optional<int64_t> at = evicted_keys_.EvictedAt(keys[i])) {
          result.evicted_ms_ago = std::max<int64_t>(1, now - *at);
          misses_evicted_.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (it->second.state != ObjectState::kComplete) {
        ++shard.misses;
        outcomes[i] = NamespaceHits::Outcome::kMiss;
        result.status = NotReady(fmt::format("put of key {} has not ended", QuoteKey(keys[i])));
      } else if (it->second.tier == ObjectTier::kPromoting) {
        ++shard.misses;
        outcomes[i] = NamespaceHits::Outcome::kMiss;
        result.status = NotReady(fmt::format("key {} is being loaded from SSD for another read", QuoteKey(keys[i])));
      } else if (it->second.tier == ObjectTier::kSsd && options_.promote_on_hit) {
        ++shard.hits;
        outcomes[i] = NamespaceHits::Outcome::kHit;
        const ObjectMeta& meta = it->second;
        ssd_reads.push_back({i, meta.replicas.begin()->segment, meta.length, meta.put_id});
      } else if (it->second.tier == ObjectTier::kSsd) {
        ++shard.hits;
        outcomes[i] = NamespaceHits::Outcome::kHit;
        ssd_hits_.fetch_add(1, std::memory_order_relaxed);
        const ObjectMeta& meta = it->second;
        const PlacedReplica& replica = *meta.replicas.begin();
        if (replica.segment->journal()) replica.segment->journal()->Append(internal::TouchSsdRecord(it->first));
        internal::AnswerWith(meta, result, &referenced);
        result.on_ssd = true;
      } else {
        ++shard.hits;
        outcomes[i] = NamespaceHits::Outcome::kHit;
        ObjectMeta& meta = it->second;
        meta.lease_until_ms = std::max(meta.lease_until_ms, lease_until);
        // One on its way to SSD is out of the eviction order: nothing to move.
        if (meta.lru_unit != EvictionLru::kNoUnit) touched.push_back(meta.lru_unit);
        internal::AnswerWith(meta, result, &referenced);
      }
    }
    // Under the shard lock still: the units cannot end meanwhile.
    lru_.TouchAll(touched, now);
  });
  namespace_hits_.Add(keys, outcomes);
  if (!ssd_reads.empty()) {
    PromoteForRead(keys, ssd_reads, lease_until, &out, &referenced);
    // Loading from SSD took part of the lease: the client counts it from when it sent the
    // call, so the whole batch gets as much longer (within max_lease_ms, which stores wait out).
    const int64_t loaded = clock_->NowMs();
    const uint64_t longer = std::min<uint64_t>(out.lease_ms + static_cast<uint64_t>(std::max<int64_t>(0, loaded - now)),
                                               options_.max_lease_ms);
    if (longer > out.lease_ms) {
      out.lease_ms = longer;
      lease_until = now + static_cast<int64_t>(longer);
      VisitByShard(index_, keys, [&](ObjectShard& shard, std::span<const HashedKey> hashed,
                                     std::span<const uint32_t> indices) {
        for (uint32_t i : indices) {
          if (!out.results[i].status.ok()) continue;
          auto it = shard.objects.find(hashed[i]);
          if (it != shard.objects.end()) it->second.lease_until_ms = std::max(it->second.lease_until_ms, lease_until);
        }
      });
    }
  }
  // A new master must not hand out bytes a lease granted here still covers: every store
  // holding a leased copy has been promised a horizon past the lease (usually long since).
  JournalWaits waits;
  const int64_t lease_until_unix = UnixMs(lease_until);
  for (const auto& segment : referenced) {
    if (!segment->journal()) continue;
    waits.Note(segment, segment->journal()->PromiseLeaseHorizon(
                            lease_until_unix,
                            lease_until_unix + static_cast<int64_t>(options_.default_lease_ms)));
  }
  if (!waits.empty()) {
    const auto failed = waits.Wait(std::chrono::milliseconds(options_.index_sync_timeout_ms));
    for (GetResult& result : out.results) {
      if (failed.empty() || !result.status.ok()) continue;
      std::erase_if(result.replicas,
                    [&](const ReplicaView& r) { return failed.count(r.segment_id) != 0; });
      if (result.replicas.empty()) {
        result.status = Unavailable("the store holding the object did not confirm the read "
                                    "lease in time");
      }
    }
  }
  out.segments = InfosOf(referenced);
  return out;
}

void PoolMetadata::BatchExists(std::span<const std::string_view> keys, std::string* out) {
  const size_t base = out->size();
  out->resize(base + keys.size(), '\0');
  char* flags = out->data() + base;
  VisitByShard(index_, keys, [&](ObjectShard& shard, std::span<const HashedKey> hashed,
                                 std::span<const uint32_t> indices) {
    for (uint32_t i : indices) {
      auto it = shard.objects.find(hashed[i]);
      flags[i] = it != shard.objects.end() && it->second.state == ObjectState::kComplete ? 1 : 0;
    }
  });
}

std::vector<Status> PoolMetadata::BatchRetain(std::span<const std::string_view> keys, uint64_t retain_ms,
                                              uint64_t reuse_in_ms) {
  // A session waits minutes, not days; the bound also keeps now + retain_ms from overflowing.
  constexpr uint64_t kMaxRetainMs = 24 * 3600 * 1000;
  if (retain_ms > kMaxRetainMs) {
    return std::vector<Status>(keys.size(), InvalidArgument(fmt::format("retain_ms {} is above the most a retention "
                                                                        "may last ({} ms)", retain_ms, kMaxRetainMs)));
  }
  const int64_t now = clock_->NowMs();
  const int64_t reuse_at = now + static_cast<int64_t>(std::min(reuse_in_ms, retain_ms));
  // The bound as the call found the pool (units come and go by the thousand; one count will do).
  const size_t units = lru_.unit_count();
  const auto max_retained = static_cast<size_t>(options_.max_retained_fraction * static_cast<double>(units));
  std::vector<Status> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string_view key = keys[i];
    if (Status status = ValidateKey(key); !status.ok()) {
      out[i] = std::move(status);
      continue;
    }
    ObjectShard& shard = index_.shard(index_.ShardOf(key));
    std::lock_guard lock(shard.mu);
    auto it = shard.objects.find(key);
    if (it == shard.objects.end()) {
      out[i] = NotFound(fmt::format("key {} is not in the pool", QuoteKey(key)));
    } else if (it->second.state != ObjectState::kComplete) {
      out[i] = NotReady(fmt::format("put of key {} has not ended", QuoteKey(key)));
    } else if (it->second.lru_unit == EvictionLru::kNoUnit) {
      // Not in the DRAM eviction order (on SSD, or on its way): nothing to retain here.
    } else if (retain_ms == 0) {
      lru_.Release(it->second.lru_unit, now);
    } else if (!lru_.Retain(it->second.lru_unit, now + static_cast<int64_t>(retain_ms), reuse_at, max_retained, now)) {
      out[i] = NoSpace(fmt::format("the pool retains {} of its {} eviction units already (at most {:.0f}%), "
                                   "none expected later than this one",
                                   lru_.retained_units(), units, 100 * options_.max_retained_fraction));
    }
  }
  return out;
}

std::vector<Status> PoolMetadata::BatchRemove(std::span<const std::string_view> keys) {
  const int64_t now = clock_->NowMs();
  std::vector<Status> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string_view key = keys[i];
    if (Status status = ValidateKey(key); !status.ok()) {
      out[i] = std::move(status);
      continue;
    }
    std::vector<PlacedReplica> freed;
    {
      ObjectShard& shard = index_.shard(index_.ShardOf(key));
      std::lock_guard lock(shard.mu);
      auto it = shard.objects.find(key);
      if (it == shard.objects.end()) {
        out[i] = NotFound(fmt::format("key {} is not in the pool", QuoteKey(key)));
        continue;
      }
      if (it->second.state == ObjectState::kPending) {
        // Its writer may still be writing; freeing now could hand those bytes to another put.
        out[i] = NotReady(fmt::format("put of key {} has not ended; the writer revokes it",
                                      QuoteKey(key)));
        continue;
      }
      const int64_t lease_until = it->second.lease_until_ms;
      const uint64_t put_id = it->second.put_id;
      if (lease_until > now) {
        // Hidden from now on; the bytes stay put until the last reader's lease ends.
        freed = EraseLocked(shard, key, proto::IndexRecord::REMOVE);
        std::lock_guard deferred_lock(deferred_mu_);
        deferred_.push_back({lease_until, std::move(freed), put_id});
        freed.clear();
      } else {
        freed = EraseLocked(shard, key);
      }
    }
    FreeReplicas(freed);
  }
  return out;
}

// ---- introspection and background work ----

PoolStats PoolMetadata::Stat() const {
  PoolStats stats;
  for (size_t i = 0; i < index_.shard_count(); ++i) {
    ObjectShard& shard = index_.shard(i);
    std::lock_guard lock(shard.mu);
    stats.objects += shard.objects.size();
    stats.hits += shard.hits;
    stats.misses += shard.misses;
  }
  for (const auto& segment : segments_.Snapshot()) {
    stats.used_bytes += segment->used_bytes();
    stats.capacity_bytes += segment->capacity();
    stats.segments.push_back({segment->info(), segment->used_bytes(), segment->allocation_count(),
                              segment->ssd_used_bytes(), segment->ssd_objects()});
    stats.tiers.ssd_used_bytes += segment->ssd_used_bytes();
    stats.tiers.ssd_objects += segment->ssd_objects();
    stats.tiers.ssd_capacity_bytes += segment->ssd_max_value_bytes() > 0 ? segment->info().ssd_capacity_bytes : 0;
  }
  stats.evicted_objects = evicted_objects_.load(std::memory_order_relaxed);
  stats.misses_evicted = misses_evicted_.load(std::memory_order_relaxed);
  stats.evicted_bytes = evicted_bytes_.load(std::memory_order_relaxed);
  stats.groups = groups_.group_count();
  stats.eviction_units = lru_.unit_count();
  stats.retained_units = lru_.retained_units();
  stats.displaced_retentions = lru_.displaced_retentions();
  stats.eviction_units_visited = lru_.checked_out_total();
  stats.eviction_units_reranked = lru_.reranked_total();
  stats.rejoined_segments = rejoined_segments_.load(std::memory_order_relaxed);
  stats.rebuilt_objects = rebuilt_objects_.load(std::memory_order_relaxed);
  stats.rebuild_seconds = static_cast<double>(rebuild_ns_.load(std::memory_order_relaxed)) / 1e9;
  stats.namespaces = quotas_.Usage();
  stats.tiers.demoting_bytes = demoting_bytes_.load(std::memory_order_relaxed);
  stats.tiers.demotions = demotions_.load(std::memory_order_relaxed);
  stats.tiers.demotion_failures = demotion_failures_.load(std::memory_order_relaxed);
  stats.tiers.promotions = promotions_.load(std::memory_order_relaxed);
  stats.tiers.promotion_failures = promotion_failures_.load(std::memory_order_relaxed);
  stats.tiers.ssd_evictions = ssd_evictions_.load(std::memory_order_relaxed);
  stats.tiers.ssd_hits = ssd_hits_.load(std::memory_order_relaxed);
  stats.namespace_hits = namespace_hits_.Snapshot();
  return stats;
}

void PoolMetadata::RunMaintenance() {
  const int64_t now = clock_->NowMs();
  ReclaimTimedOutPuts(now);
  FreeEndedLeases(now);
  for (uint64_t id : segments_.TakeExpiredSegments(now, options_.heartbeat_ttl_ms)) {
    if (auto segment = segments_.Remove(id)) DropSegmentReplicas(*segment);
  }
  // A store too far behind on its index is dropped; it rejoins with what it has applied.
  for (const auto& segment : segments_.Snapshot()) {
    if (segment->journal() && segment->journal()->broken() && segments_.Remove(segment->id())) {
      DropSegmentReplicas(*segment);
    }
  }
  ExtendLeaseHorizons(now);
  const uint64_t capacity = segments_.capacity_bytes();
  // Bytes on their way to SSD are as good as freed: counting them would demote more each pass.
  const uint64_t allocated = segments_.used_bytes();
  const uint64_t used = allocated - std::min(allocated, demoting_bytes_.load());
  if (capacity > 0 && static_cast<double>(used) > options_.high_watermark * static_cast<double>(capacity)) {
    // Where stores have SSD tiers, the background pass demotes what it can instead of
    // dropping it; a put that finds no room still drops synchronously (AllocateWithEviction).
    const auto snapshot = segments_.Snapshot();
    const bool demote = std::any_of(snapshot.begin(), snapshot.end(),
                                    [](const auto& s) { return s->ssd_max_value_bytes() > 0; });
    std::lock_guard lock(eviction_mu_);
    EvictLocked(static_cast<uint64_t>(options_.evict_fraction * static_cast<double>(capacity)),
                now, {}, demote);
  }
}

void PoolMetadata::ReclaimTimedOutPuts(int64_t now_ms) {
  std::vector<PlacedReplica> reclaimed;
  for (size_t i = 0; i < index_.shard_count(); ++i) {
    ObjectShard& shard = index_.shard(i);
    std::lock_guard lock(shard.mu);
    while (!shard.pending.empty()) {
      const PendingPut& put = shard.pending.front();
      auto it = shard.objects.find(put.key);
      bool still_pending = it != shard.objects.end() && it->second.put_id == put.put_id &&
                           it->second.state == ObjectState::kPending;
      if (still_pending) {
        if (now_ms - put.started_ms < static_cast<int64_t>(options_.put_timeout_ms)) break;
        auto replicas = EraseLocked(shard, put.key);
        reclaimed.insert(reclaimed.end(), std::make_move_iterator(replicas.begin()),
                         std::make_move_iterator(replicas.end()));
      }
      shard.pending.pop_front();
    }
  }
  FreeReplicas(reclaimed);
}

void PoolMetadata::FreeEndedLeases(int64_t now_ms) {
  std::vector<DeferredFree> ended;
  {
    std::lock_guard lock(deferred_mu_);
    auto split = std::partition(deferred_.begin(), deferred_.end(),
                                [&](const DeferredFree& d) { return d.free_at_ms > now_ms; });
    std::move(split, deferred_.end(), std::back_inserter(ended));
    deferred_.erase(split, deferred_.end());
  }
  for (const auto& d : ended) DropAndFree(d.replicas, d.put_id);
}

uint64_t PoolMetadata::EvictAtLeast(uint64_t bytes) {
  std::lock_guard lock(eviction_mu_);
  return EvictLocked(bytes, clock_->NowMs());
}

}  // namespace kvpool::master
