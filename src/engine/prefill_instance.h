// PrefillInstance: one pipeline-parallel prefill instance — a paged KV cache per stage (host
// memory standing in for each stage GPU, or that GPU's memory with --gpu), one GPU prefix cache
// over them, chunked prefill
// with a max-batched-tokens budget, and the pool connector (restore before, save after).
//
// A request's life here:
//   Prefetch: (with DeploymentOptions::prefetch_share) on arrival, before the admission gate:
//             take its GPU-cached prefix and blocks for the pool's run beyond it and restore
//             that now, so the restore's emulated time overlaps the request's waits.
//   Enqueue:  queue, holding nothing (but a prefetch). A request *starts* only when the work started ahead of
//             compute is below a few iterations' budget (like a scheduler that allocates at
//             schedule time): queued requests hold no blocks, so a long queue cannot evict
//             the prefixes the queue itself is about to need.
//   start:    take the GPU-cached prefix and blocks for the rest; with a pool, find the
//             prefix the pool holds beyond it (FindCachedPrefix), restore it for real
//             (RestoreEngine) and verify every restored byte; the request is ready for
//             compute once the emulated restore time has passed — other requests keep
//             computing meanwhile.
//   compute:  micro-batches of at most max_batched_tokens, FIFO, through the pipeline's
//             stages one after another; a new one enters when the first stage is free, up to
//             one per stage in flight, and a request is in at most one of them (its chunks
//             are serialized, as vLLM's batch queue does under PP), so only several requests
//             fill the pipeline. Each writes the KV of the tokens it computes into every
//             stage's cache (real bytes, emulated time).
//   done:     save the new full chunks to the pool (SaveEngine), then hand the request to
//             `on_prefill_done`; the deployment hands off its KV and calls Release.
// Single-threaded (the event loop); the connector's engines use their own threads and are
// waited for synchronously, so their wall time never moves emulated time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "connector/connector_metrics.h"
#include "connector/prefix_lookup.h"
#include "connector/restore_engine.h"
#include "connector/save_engine.h"
#include "engine/deployment_context.h"
#include "engine/gpu_prefix_cache.h"
#include "engine/kv_cache_memory.h"
#include "engine/in_flight_request.h"

namespace kvpool::engine {

class PrefillInstance {
 public:
  // `pool`: the pool this instance saves to and restores from (null: none).
  static Result<std::unique_ptr<PrefillInstance>> Create(int index, EngineSlot slot, connector::ChunkStore* pool,
                                                         const DeploymentContext& ctx);
  PrefillInstance(const PrefillInstance&) = delete;
  PrefillInstance& operator=(const PrefillInstance&) = delete;

  std::function<void(InFlightRequest*)> on_prefill_done;

  void Enqueue(InFlightRequest* r);
  // Restore prefetch (issue 18): r has just arrived and will be enqueued here once admitted.
  // Its pool prefix is restored now — real bytes; the emulated restore time runs from now — so
  // that when it starts it waits only for what is still in flight. Prefetches hold at most
  // prefetch_share of the cache's blocks; one that does not fit waits for room, oldest first,
  // and a request that starts before its prefetch ran restores at its start. A request that
  // cannot start for want of blocks takes those of the latest prefetches.
  void Prefetch(InFlightRequest* r);
  // r failed before it started: gives back what its prefetch holds.
  void DropPrefetch(InFlightRequest* r);
  // Publishes the request's full blocks in the prefix cache and drops its references.
  void Release(InFlightRequest* r);
  // Returns once no restore window of this instance is queued or reading (a timed-out
  // restore's late reads included): its metrics are final until the next restore.
  void WaitIdle();

  // Tokens admitted here and not computed yet: the router's load signal.
  double load() const { return static_cast<double>(pending_tokens_); }
  const GpuPrefixCache& prefix_cache() const { return prefix_cache_; }
  const connector::ConnectorMetrics& connector_metrics() const { return metrics_; }
  std::vector<const connector::PagedKvCache*> stage_caches() const;
  std::vector<int> stage_devices() const;  // CUDA device per stage (-1: host memory)
  uint64_t restore_errors() const { return restore_errors_; }
  uint64_t save_failures() const { return save_failures_; }
  uint64_t prefetches() const { return prefetches_; }
  uint64_t prefetches_dropped() const { return prefetches_dropped_; }

 private:
  PrefillInstance(int index, EngineSlot slot, connector::ChunkStore* pool, const DeploymentContext& ctx);
  // Starts queued requests while little compute is lined up ahead of the forward pass, or
  // fewer requests are started than the pipeline has stages.
  void StartQueued();
  // Takes blocks and restores; false when the cache has no room now (retried later).
  bool TryStart(InFlightRequest* r);
  // The pool's run of r's prompt (up to prompt_cap) beyond its first gpu_tokens; an error
  // (counted, logged) when the lookup failed.
  Result<connector::PrefixHit> LookUp(const InFlightRequest& r, uint64_t prompt_cap, uint64_t gpu_tokens);
  // Restores `hit` into r's blocks, which cover it, and verifies it; returns the emulated
  // restore time (the slowest stage's), 0 when nothing was restored.
  double Restore(InFlightRequest* r, const connector::PrefixHit& hit, uint64_t gpu_tokens);
  // Prefetches waiting requests, oldest first, while the budget has room.
  void PumpPrefetches();
  // One prefetch. False when it does not fit the budget or the cache now (retried later);
  // true when done or when there is nothing to prefetch.
  bool TryPrefetch(InFlightRequest* r);
  // Takes r off the prefetch lists (prefetched: its blocks no longer count as prefetched).
  void ForgetPrefetch(InFlightRequest* r);
  // Gives back the blocks r's prefetch holds; `restarts`: r restores at its start instead.
  void ReleasePrefetch(InFlightRequest* r, bool restarts);
  // Sends the next micro-batch into the pipeline when its first stage is free.
  void Kick();
  void FinishMicroBatch(const std::vector<InFlightRequest*>& batch, const std::vector<PrefillSlice>& spans);
  void SaveToPool(InFlightRequest* r);
  std::vector<std::vector<connector::BlockId>> StageTables(const InFlightRequest& r) const;
  // A pool spread over every server: stage `stage`'s share of `tokens` moves between this
  // server and each other one's stores on its rail (to_pool: a save). Returns when the last
  // byte arrives (now, when the pool is this server's own).
  double PoolRailEnd(uint32_t stage, uint64_t tokens, bool to_pool);

  const int index_;
  const EngineSlot slot_;
  connector::ChunkStore* const pool_;
  const DeploymentContext ctx_;
  std::vector<std::unique_ptr<KvCacheMemory>> stages_;
  GpuPrefixCache prefix_cache_;
  connector::ConnectorMetrics metrics_;
  std::unique_ptr<connector::RestoreEngine> restore_;
  std::unique_ptr<connector::SaveEngine> save_;

  std::deque<InFlightRequest*> queued_;  // not started: hold no blocks
  std::deque<InFlightRequest*> ready_;  // FIFO for compute; the head may be part-computed
  std::vector<double> stage_free_at_;  // emulated time each pipeline stage is next free
  bool first_stage_busy_ = false;
  size_t micro_batches_in_flight_ = 0;
  size_t started_requests_ = 0;  // started and not yet through prefill
  uint64_t pending_tokens_ = 0;  // compute left of every request here, started or not
  uint64_t started_tokens_ = 0;  // compute left of started requests (restoring or ready)
  uint64_t restore_errors_ = 0;
  uint64_t save_failures_ = 0;

  std::deque<InFlightRequest*> prefetch_waiting_;  // arrived, no room to prefetch yet
  std::vector<InFlightRequest*> prefetched_;       // hold prefetched blocks, not started
  const uint64_t prefetch_budget_blocks_;
  uint64_t prefetch_held_blocks_ = 0;
  uint64_t prefetches_ = 0, prefetches_dropped_ = 0;
};

}  // namespace kvpool::engine
