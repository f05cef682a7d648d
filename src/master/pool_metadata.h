// PoolMetadata: everything the master knows about the pool, and the rules that keep it
// consistent. It never touches a value's bytes — only where they live.
//
//   segments  (SegmentTable)   mounted segments, their allocators, store liveness
//   objects   (ObjectIndex)    key -> {length, replicas, state, group, pin, lease, unit}
//   groups    (GroupRegistry)  group -> member keys, so eviction can take a group whole
//   order     (EvictionLru)    eviction units (groups, ungrouped objects) by recency and pin
//
// Rules kept here (docs/architecture.md):
//   * An object is visible to readers only after PutEnd; a pending put older than
//     put_timeout_ms is reclaimed.
//   * Space of an object is never freed, evicted or reused while a lease on it is live;
//     removing a leased object hides it at once and frees it when the lease ends.
//   * Allocation is exact, so capacity is never exceeded; when it fails, LRU eviction runs,
//     and if that cannot free enough the put fails NO_SPACE.
//   * A group is evicted whole or not at all; a group with a leased or pending member is
//     skipped; pinned groups go only after every unpinned candidate.
//
// Thread-safe. Time comes from the injected Clock; nothing here starts a thread — the
// server calls RunMaintenance periodically, tests call it after moving a ManualClock.
//
// The index outlives the master (docs/architecture.md, invariant 8): a segment whose store
// keeps its index has a SegmentJournal, and every change to an object in it is appended
// there. A call that placed, completed or leased objects waits, with no lock held, until
// their stores confirmed (at most index_sync_timeout_ms; a key whose store did not confirm
// fails UNAVAILABLE). A new master rebuilds from those indexes (RejoinSegment).
//
// Lock order (never acquire an earlier lock while holding a later one):
//   1. eviction_mu_                   one eviction pass at a time
//   2. object shard mutexes           ascending shard index when holding several
//   3. group registry shard mutex     one at a time
//   4. lru_'s mutex                   the eviction order (never held with 3)
//   5. deferred_mu_                   removed-while-leased objects awaiting their free
//   6. segment table mutex, then a segment's allocator mutex (leaves)
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "master/eviction_lru.h"
#include "master/eviction_memory.h"
#include "master/group_registry.h"
#include "master/namespace_hits.h"
#include "master/namespace_quotas.h"
#include "master/object_index.h"
#include "master/segment_table.h"
#include "proto/master.pb.h"

namespace kvpool::master {

struct PoolOptions {
  double high_watermark = 0.90;  // background eviction starts above used/capacity this high
  double evict_fraction = 0.05;  // each eviction pass frees this fraction of capacity
  uint64_t default_lease_ms = 5000;
  uint64_t max_lease_ms = 60000;
  uint64_t put_timeout_ms = 30000;
  uint64_t heartbeat_ttl_ms = 5000;
  size_t shards = 16;
  size_t max_key_bytes = 4096;
  uint64_t max_value_bytes = uint64_t{1} << 40;
  uint64_t alignment = 64;
  // How long a call waits for stores to confirm its changes to their indexes.
  uint64_t index_sync_timeout_ms = 2000;
  // A byte quota per namespace (namespace_quotas.h); none by default. Objects count against
  // it in whichever tier they are.
  QuotaOptions quotas;
  // Demotion to the stores' SSD tiers (pool_tiering.cc): at most this many bytes on their way
  // at once; a background pass that finds the queue full stops and lets it drain.
  uint64_t max_demoting_bytes = uint64_t{256} << 20;
  // A lookup that finds an object on SSD: false (the default) answers where it lies in the
  // store's tier file, for the client to read it from there into its own buffer (no DRAM
  // taken, no wait for a load); true loads it into the segment first and answers that copy.
  bool promote_on_hit = false;
  // Router hints (BatchRetain) retain at most this share of the eviction units at once: the
  // rest is plain LRU, so a client that sends no hints keeps a share of the pool (a retained
  // unit is still evicted when nothing else is left: hints never make a put fail).
  double max_retained_fraction = 0.5;
  // Keys evicted for good that lookups can still tell apart from keys never stored
  // (eviction_memory.h: 16 bytes each, the oldest forgotten first; 0: none).
  size_t remembered_evictions = size_t{1} << 20;
};

struct PutOptions {
  uint32_t replicas = 1;  // 0 => 1
  std::string group;      // "" => the object is its own group
  uint64_t pin_ttl_ms = 0;
};

struct PutStartItem {
  std::string_view key;
  uint64_t length = 0;
  std::string_view group;  // "" => PutOptions::group
  uint64_t checksum = 0;   // the writer's checksum of the value, handed to readers
};

// One copy of an object as clients see it.
struct ReplicaView {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct PutStartResult {
  Status status;
  std::vector<ReplicaView> replicas;
};

struct BatchPutStartResult {
  std::vector<PutStartResult> results;  // one per item, in order
  std::vector<SegmentInfo> segments;    // every segment referenced above, once
};

struct GetResult {
  Status status;
  uint64_t length = 0;
  uint64_t checksum = 0;
  std::vector<ReplicaView> replicas;
  bool on_ssd = false;  // the one replica is in its store's SSD tier; its offset is into the file
  // NOT_FOUND only: how long ago (ms, >= 1) this master evicted the key; 0 when it has no
  // record (never stored here, or evicted longer ago than it remembers).
  int64_t evicted_ms_ago = 0;
};

struct BatchGetResult {
  std::vector<GetResult> results;
  std::vector<SegmentInfo> segments;
  uint64_t lease_ms = 0;  // granted, counted from when the call was received
};

struct SegmentStats {
  SegmentInfo info;
  uint64_t used_bytes = 0;
  uint64_t objects = 0;  // copies stored on the segment
  uint64_t ssd_used_bytes = 0;  // values in its store's SSD tier
  uint64_t ssd_objects = 0;
};

// What the stores' SSD tiers did, as the master counts it (pool_tiering.cc).
struct TierStats {
  uint64_t ssd_used_bytes = 0;
  uint64_t ssd_capacity_bytes = 0;
  uint64_t ssd_objects = 0;
  uint64_t demoting_bytes = 0;       // on their way to SSD now
  uint64_t demotions = 0;            // objects that reached SSD
  uint64_t demotion_failures = 0;    // a store could not write them: dropped instead
  uint64_t promotions = 0;           // SSD objects a read loaded back into a segment
  uint64_t promotion_failures = 0;   // a store could not read them (gone, corrupt): a miss
  uint64_t ssd_evictions = 0;        // dropped by a full SSD tier
  uint64_t ssd_hits = 0;             // lookups that found the object on SSD
};

struct PoolStats {
  uint64_t objects = 0;  // pending and complete
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t evicted_objects = 0;
  uint64_t evicted_bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t misses_evicted = 0;  // of those, keys this master remembers evicting (eviction_memory.h)
  uint64_t groups = 0;
  uint64_t eviction_units = 0;          // groups and ungrouped complete objects
  uint64_t eviction_units_visited = 0;  // units eviction passes looked at, all passes together
  uint64_t eviction_units_reranked = 0;  // units passes moved back, read since they were ranked
  uint64_t retained_units = 0;           // units a router's BatchRetain keeps (issue 18)
  uint64_t displaced_retentions = 0;     // retentions a sooner one took the place of
  std::vector<SegmentStats> segments;
  std::vector<NamespaceUsage> namespaces;  // those with a quota
  std::vector<NamespaceHitCount> namespace_hits;  // lookups per namespace (NamespaceHits)
  uint64_t rejoined_segments = 0;  // segments taken back from their stores' indexes
  uint64_t rebuilt_objects = 0;    // objects those indexes gave back
  double rebuild_seconds = 0;      // time spent taking them back, all rejoins together
  TierStats tiers;
};

struct RejoinResult {
  SegmentInfo info;
  uint64_t objects = 0;  // entries that are objects in the index again
  uint64_t held = 0;     // entries whose bytes stay reserved until the lease horizon only
  uint64_t skipped = 0;  // malformed entries (outside the segment, overlapping, bad key)
  double seconds = 0;    // how long the rebuild took
};

class PoolMetadata {
 public:
  // REQUIRES: `clock` outlives this object.
  PoolMetadata(PoolOptions options, Clock* clock);

  PoolMetadata(const PoolMetadata&) = delete;
  PoolMetadata& operator=(const PoolMetadata&) = delete;

  const PoolOptions& options() const { return options_; }

  // ---- segments ----
  // Registers a segment; returns it with its assigned id.
  Result<SegmentInfo> MountSegment(SegmentInfo info);
  // Unmounts and drops every copy stored on it.
  Status UnmountSegment(uint64_t segment_id);
  // Returns the ids the store must remount (not mounted for it any more).
  std::vector<uint64_t> Heartbeat(const std::string& store_id,
                                  std::span<const uint64_t> segment_ids);
  // Takes back a segment that a store held under a previous master (info.id is its old id),
  // with the index the store kept (pool_rejoin.cc). Every entry's bytes are reserved; each
  // complete or pending object comes back with its group, pin and put; every object is
  // leased until `lease_horizon_unix_ms` (the old master's promise: no lease it granted ends
  // later), and removed or superseded entries are freed only then.
  // ALREADY_EXISTS when the id is mounted; INVALID_ARGUMENT for a bad id or segment.
  Result<RejoinResult> RejoinSegment(SegmentInfo info,
                                     std::span<const proto::IndexEntry* const> entries,
                                     int64_t lease_horizon_unix_ms);
  // Objects a store has in its SSD tier (entries with on_ssd; others are skipped) become SSD
  // objects of its segment `segment_id`: how a store restarted on its SSD file, or rejoining,
  // brings them back. A key the pool already has keeps its copy. Returns how many were taken.
  uint64_t TakeSsdObjects(uint64_t segment_id, std::span<const proto::IndexEntry* const> entries);
  // What a store's SSD tier did (proto::TierReport), applied before its PullIndex confirms.
  void ApplyTierReports(uint64_t segment_id, const google::protobuf::RepeatedPtrField<proto::TierReport>& reports);

  // The segment's journal, for the store's PullIndex; null if not mounted or keeping none.
  std::shared_ptr<Segment> FindSegment(uint64_t segment_id) const {
    return segments_.Find(segment_id);
  }

  // ---- objects ----
  BatchPutStartResult BatchPutStart(std::span<const PutStartItem> items,
                                    const PutOptions& options);
  std::vector<Status> BatchPutEnd(std::span<const std::string_view> keys);
  std::vector<Status> BatchPutRevoke(std::span<const std::string_view> keys);
  // lease_ms 0 => default_lease_ms; capped at max_lease_ms.
  BatchGetResult BatchGetReplicas(std::span<const std::string_view> keys, uint64_t lease_ms);
  // Appends one byte per key to `out`: 1 if the key is present and complete, else 0.
  void BatchExists(std::span<const std::string_view> keys, std::string* out);
  std::vector<Status> BatchRemove(std::span<const std::string_view> keys);
  // A router's hint (issue 18; eviction_lru.h): retain_ms > 0 keeps each key's eviction unit
  // (its group, or itself) over units without a pin for that long, expected to be read again
  // in reuse_in_ms (at most retain_ms; retained units needed last are evicted first); 0
  // releases it, first to evict. NOT_FOUND for an absent key, NOT_READY for a put not ended,
  // NO_SPACE when max_retained_fraction of the units are retained already and none of them is
  // expected later, INVALID_ARGUMENT for every key when retain_ms is above a day; a key not in
  // DRAM (on SSD, or on its way there) is OK and unchanged.
  std::vector<Status> BatchRetain(std::span<const std::string_view> keys, uint64_t retain_ms, uint64_t reuse_in_ms);

  PoolStats Stat() const;

  // Background work, one pass: reclaim timed-out puts, free removed objects whose lease
  // ended, drop segments of silent stores, evict if above the high watermark.
  void RunMaintenance();

  // Waits until every store that keeps an index has confirmed all of its journal, or
  // `deadline`; true when all did. A leader handing over calls it, so that the next leader
  // rebuilds everything this one answered (invariant 8).
  bool WaitIndexSynced(std::chrono::steady_clock::time_point deadline);

  // A leader that serves again after a pause (it could not renew its etcd lease for a while,
  // and answered nobody) counts every store as heard from now, instead of dropping them for
  // heartbeats it refused.
  void ForgiveStoreSilence();

  // Runs one eviction pass that tries to free at least `bytes`; returns bytes freed.
  uint64_t EvictAtLeast(uint64_t bytes);

 private:
  struct DeferredFree {
    int64_t free_at_ms = 0;
    std::vector<PlacedReplica> replicas;
    uint64_t put_id = 0;  // the put the bytes belong to, for the stores' DROP records
  };
  // What trying to evict one unit came to: bytes freed (0: not evicted), and if it is blocked
  // by leases alone, until when.
  struct EvictionAttempt {
    uint64_t freed_bytes = 0;
    int64_t blocked_until_ms = 0;
  };

  Status ValidateKey(std::string_view key) const;
  Status ValidatePut(const PutStartItem& item) const;

  // Counts a new object's `length` against its namespace's quota, first evicting that
  // namespace's own least recently used objects when it would pass it. NO_SPACE when the
  // value is larger than the quota, or eviction could not make room (all leased or pending).
  // REQUIRES: no shard lock held.
  Status ChargeQuota(std::string_view key, uint64_t length);

  // Allocates copies, evicting synchronously when the pool is full. `segments` is the
  // caller's snapshot of the mounted segments; it is refreshed after an eviction pass.
  Result<std::vector<PlacedReplica>> AllocateWithEviction(
      uint64_t length, uint32_t copies, std::vector<std::shared_ptr<Segment>>* segments);

  // Erases `key` (REQUIRES: shard.mu held) and returns its copies for the caller to free.
  // Tells each copy's store first (`op`: DROP, or REMOVE when the bytes stay until a lease
  // ends), so the record is in the journal before the bytes can be placed again.
  std::vector<PlacedReplica> EraseLocked(ObjectShard& shard, std::string_view key,
                                         proto::IndexRecord::Op op = proto::IndexRecord::DROP);
  // Appends `record` to the journal of the copy's segment; the sequence number, or 0 when the
  // store keeps no index.
  static uint64_t Journal(const PlacedReplica& replica, proto::IndexRecord record);
  // Wall-clock milliseconds (what stores keep) for a time of clock_, and back.
  int64_t UnixMs(int64_t clock_ms) const;
  int64_t ClockMs(int64_t unix_ms) const;
  // Promises every journaled segment a lease horizon well past the default lease, so reads
  // rarely wait for one (RunMaintenance).
  void ExtendLeaseHorizons(int64_t now_ms);
  // Frees the copies after telling their stores (DROP of `put_id`).
  static void DropAndFree(const std::vector<PlacedReplica>& replicas, uint64_t put_id);
  // Erases `key` if it is still the put `put_id` and frees its space.
  void AbandonPut(std::string_view key, uint64_t put_id);
  // Takes the object out of the eviction order and its group (REQUIRES: its shard lock held).
  void ForgetLocked(const std::string& key, ObjectMeta& meta, int64_t now_ms);
  // A complete object enters the eviction order, ranked at `last_access_ms`, deferred until
  // `blocked_until_ms` (REQUIRES: its shard lock held; `key` is the index's own).
  void EnterEvictionOrderLocked(const std::string& key, ObjectMeta& meta, int64_t last_access_ms,
                                int64_t blocked_until_ms, int64_t now_ms);

  void ReclaimTimedOutPuts(int64_t now_ms);
  void FreeEndedLeases(int64_t now_ms);
  // Drops every copy on `segment`; objects left with none are removed.
  void DropSegmentReplicas(const Segment& segment);

  // Eviction (pool_eviction.cc). REQUIRES: eviction_mu_ held. With `only_namespace`, units
  // of other namespaces are passed over (a quota's own eviction). With `demote`, a unit whose
  // objects can go to their stores' SSD tiers is demoted instead of dropped (its bytes count
  // as freed: they will be once the stores report), and the pass stops when the demotion
  // queue is full.
  uint64_t EvictLocked(uint64_t bytes, int64_t now_ms, std::optional<std::string_view> only_namespace = {},
                       bool demote = false);
  EvictionAttempt EvictSingle(const EvictionLru::Candidate& candidate, int64_t now_ms, bool demote);
  EvictionAttempt EvictGroup(const EvictionLru::Candidate& candidate, int64_t now_ms, bool demote);

  // The SSD tier (pool_tiering.cc). All REQUIRE the object's shard lock.
  // True when the object can be demoted: complete, in the segment, one copy, on a segment
  // whose store has an SSD tier with slots large enough.
  static bool DemotableLocked(const ObjectMeta& meta);
  // Out of the eviction order and onto its way to SSD: a DEMOTE record for its store.
  // `group_members`: how many objects its group has (0 for an ungrouped object), for the
  // store's tier to keep the group only whole across a crash.
  void DemoteLocked(const std::string& key, ObjectMeta& meta, int64_t now_ms, uint32_t group_members);
  // A lookup found SSD objects (`reads`: their positions in `keys`): each is loaded into a
  // fresh range of its store's segment (PROMOTE), the call waits for the stores, and each
  // loaded object is answered as a segment copy, leased until `lease_until_ms`.
  struct SsdRead {
    uint32_t index = 0;
    std::shared_ptr<Segment> segment;
    uint64_t length = 0;
    uint64_t put_id = 0;
  };
  void PromoteForRead(std::span<const std::string_view> keys, std::span<const SsdRead> reads,
                      int64_t lease_until_ms, BatchGetResult* out,
                      std::vector<std::shared_ptr<Segment>>* referenced);
  bool DemotionQueueFull() const;

  const PoolOptions options_;
  Clock* const clock_;
  SegmentTable segments_;
  ObjectIndex index_;
  GroupRegistry groups_;
  EvictionLru lru_;
  EvictionMemory evicted_keys_;
  NamespaceQuotas quotas_;

  std::mutex eviction_mu_;
  // Bumped after every eviction pass: a put that failed to allocate skips evicting when
  // another thread's pass ran since it last tried.
  std::atomic<uint64_t> eviction_passes_{0};
  std::atomic<uint64_t> next_put_id_{1};
  std::atomic<uint64_t> evicted_objects_{0};
  std::atomic<uint64_t> evicted_bytes_{0};
  std::atomic<uint64_t> misses_evicted_{0};
  std::atomic<uint64_t> rejoined_segments_{0};
  std::atomic<uint64_t> rebuilt_objects_{0};
  std::atomic<uint64_t> rebuild_ns_{0};
  std::atomic<uint64_t> demoting_bytes_{0};
  std::atomic<uint64_t> demotions_{0};
  std::atomic<uint64_t> demotion_failures_{0};
  std::atomic<uint64_t> promotions_{0};
  std::atomic<uint64_t> promotion_failures_{0};
  std::atomic<uint64_t> ssd_evictions_{0};
  std::atomic<uint64_t> ssd_hits_{0};
  NamespaceHits namespace_hits_;

  std::mutex deferred_mu_;
  std::vector<DeferredFree> deferred_;  // guarded by deferred_mu_
};

}  // namespace kvpool::master
