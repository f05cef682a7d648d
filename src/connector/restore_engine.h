// RestoreEngine: brings a PrefixHit's chunks from the pool into every stage's paged KV cache,
// asynchronously, so a request waiting on a restore never blocks another.
//
//   hit = FindCachedPrefix(...)            // one master round trip; leases the hit
//   engine->Start(id, hit, block_tables)   // returns at once
//   ... schedule other requests ...
//   if (auto done = engine->Poll(id)) { compute from done->end_token on }
//
// Per stage, the hit is cut into windows of as many chunks as one worker's share of the
// stage's staging buffer holds. When every chunk of a window has a replica on this host, the
// window is unpacked straight from the storage service's mapped segment (zero copy: the GPU
// DMAs from the store's memory; the lease and the segment's served flag are checked after
// the unpack, and a window that outlived either is discarded). Otherwise the window is one
// ReadLookedUp into staging and one Unpack from it. Either way every object's bytes are checked
// against their writer's checksum (common/checksum.h) before the window counts as restored:
// with a CUDA packer, by the GPU once the DMA brought the object into device memory
// (checksum_kernel.h); with the CPU packer, staged objects by the transport as they land in
// staging, mapped ones on checksum_threads helpers while the packer copies the same bytes. An
// object that does not match (on every replica, when the transport checks it) is dropped from
// the pool and ends the window's usable prefix, so it and what follows are computed instead.
// Stage workers take windows in order, several at a time, so one window is read while another
// is unpacked, and a hung read holds one worker, not the stage. The workers, their packers and
// staging shares, the request table, Poll and Wait are StageJobs' (stage_jobs.h): a window is
// one of its jobs; this engine keeps the window body and the outcome.
//
// Outcome rules (invariants):
//   * A request is finished only when every stage has reported every window, or when its
//     bounded wait (RestoreOptions::timeout) ran out.
//   * restored tokens = the chunks that *every* stage unpacked, contiguously from the hit's
//     first chunk. Anything less than planned is a fallback: the engine computes the rest.
//   * Once an outcome is handed out, no worker writes that request's cache blocks again
//     (a timed-out request is cancelled and its in-flight unpacks are waited for), so the
//     engine may compute into those blocks at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/checksum.h"
#include "common/helper_pool.h"
#include "common/status.h"
#include "connector/chunk_store.h"
#include "connector/connector_metrics.h"
#include "connector/kv_namespace.h"
#include "connector/mapped_segment_pins.h"
#include "connector/prefix_lookup.h"
#include "connector/stage_jobs.h"
#include "connector/staging_buffer.h"

namespace kvpool::connector {

struct RestoreOptions {
  // Bounded wait: a restore not finished this long after Start falls back to computing.
  std::chrono::milliseconds timeout{5000};
  uint32_t workers_per_stage = 2;
  // Registered staging per stage, split evenly among its workers; each share must hold at
  // least one stage object.
  uint64_t staging_bytes_per_stage = uint64_t{64} << 20;
  // Windows waiting per stage; Start beyond it is refused (UNAVAILABLE, counted).
  size_t max_queued_windows_per_stage = 4096;
  // Same host: unpack straight from the storage service's segment mapped in this process (the
  // GPU DMAs from it; no staging copy). Windows whose chunks cannot all be mapped are read
  // into staging as usual. false: always read into staging (benchmarks compare both).
  bool unpack_from_mapped_segments = true;
  // false: restored objects, mapped or staged, are not checked against their checksum
  // (benchmarks measure what the check costs; never in service).
  bool verify_checksums = true;
  // Threads (shared by every stage's workers, each worker counted) that hash mapped objects
  // while the CPU packer copies them (a CUDA packer hashes on its GPU): one core reads ~8-15
  // GB/s from memory. 0: one per core.
  int checksum_threads = 0;
};

struct RestoreOutcome {
  uint64_t request_id = 0;
  Status status;                // OK, or why fewer tokens than planned came back
  uint64_t planned_tokens = 0;  // hit.restorable_tokens()
  uint64_t restored_tokens = 0;  // beyond the GPU-cached tokens, now in every stage's cache
  uint64_t end_token = 0;        // the GPU holds tokens [0, end_token) for every stage
  bool fell_back() const { return restored_tokens < planned_tokens; }
};

class RestoreEngine {
 public:
  // One StageDevice per pipeline stage, in stage order, laid out as `ns` says.
  // REQUIRES: `store` and `metrics` (if not null) outlive the engine.
  static Result<std::unique_ptr<RestoreEngine>> Create(ChunkStore* store, KvNamespace ns,
                                                       std::vector<StageDevice> stages, RestoreOptions options,
                                                       ConnectorMetrics* metrics);
  // Cancels every restore, drops queued windows and joins the workers.
  ~RestoreEngine();
  RestoreEngine(const RestoreEngine&) = delete;
  RestoreEngine& operator=(const RestoreEngine&) = delete;

  // Starts restoring `hit`; returns at once. block_tables[s] is stage s's block table for the
  // request, covering at least hit.end_token() tokens. Errors: INVALID_ARGUMENT (bad tables),
  // ALREADY_EXISTS (id in progress), UNAVAILABLE (queues full: compute instead).
  // A hit with nothing to restore finishes at once.
  Status Start(uint64_t request_id, const PrefixHit& hit, std::vector<std::vector<BlockId>> block_tables);

  // The outcome once finished (every stage reported, or the bounded wait ran out, which
  // cancels it), else nullopt: also while an unpack of a cancelled request is finishing (Poll
  // never waits for one). Each outcome is handed out once, then the id is free again.
  // Unknown ids give an outcome with NOT_FOUND.
  std::optional<RestoreOutcome> Poll(uint64_t request_id);
  // Blocks until Poll would answer, or until `deadline`. A restore answers by its bounded
  // wait (plus the time to finish an unpack already running), so a deadline past that gets
  // the outcome. At `deadline` it returns an outcome with NOT_READY (and nothing else set):
  // the restore goes on, may still write the request's blocks, and answers a later Poll or
  // Wait.
  RestoreOutcome Wait(uint64_t request_id, std::chrono::steady_clock::time_point deadline);
  // Blocks until no window is queued or being read: a request whose bounded wait ran out was
  // handed out cancelled, but a window of it already reading goes on until its read returns
  // (and then writes nothing). After this, the engine's metrics and the store's counters move
  // only for restores started later: a run's last word (its metrics) is final.
  void WaitIdle();

 private:
  struct Request;
  struct Window;
  RestoreEngine(ChunkStore* store, KvNamespace ns, RestoreOptions options, ConnectorMetrics* metrics);
  // StageJobs' body: restores one window, and reports it.
  void RunWindow(const StageJobs::Job& job, StageJobs::Worker& worker);
  // Unpack paths of one window; each returns how many of its chunks (a prefix) are in the cache.
  uint64_t UnpackMapped(const Window& w, ChunkPacker& packer, std::vector<transfer::MappedRange>& mapped,
                        Status& status);
  uint64_t ReadAndUnpack(const Window& w, ChunkPacker& packer, std::byte* slot, Status& status);
  // How many of w's chunks from 0 on match their checksums (`sums`) before the first that
  // does not, which is dropped (DropCorruptObject) and named in `status` (CORRUPT).
  uint64_t VerifiedPrefix(const Window& w, std::span<const uint64_t> sums, Status& status);
  // Counts chunk i of `w` as corrupt and removes its object from the pool.
  void DropCorruptObject(const Window& w, uint64_t i);
  // Maps every chunk of `w` in place, or returns false (then the window is read into staging).
  bool MapWindow(const Window& w, std::vector<transfer::MappedRange>& mapped);
  // StageJobs' finish, under r.mu: r's outcome, every window in or (ran_out) its bounded wait over.
  void Finish(Request& r, bool ran_out);

  ChunkStore* const store_;
  const KvNamespace ns_;
  const RestoreOptions options_;
  ConnectorMetrics* const metrics_;
  ConnectorMetrics own_metrics_;  // used when none is given
  MappedSegmentPins pins_;  // mappings GPU stages unpack from; outlives the workers (joined in ~RestoreEngine)
  std::unique_ptr<HelperPool> checksum_pool_;  // hashes mapped objects with the workers
  std::unique_ptr<StageJobs> jobs_;  // the stages' workers run RunWindow; reset first in ~RestoreEngine
};

}  // namespace kvpool::connector
