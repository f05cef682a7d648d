// SaveEngine: after prefill, packs each new full chunk of a request's KV from every stage's
// paged cache into that stage's staging buffer and puts it into the pool, off the forward
// pass: Submit only queues, stage workers do the rest.
//
//   engine->Submit(id, tokens, block_tables)  // returns at once; UNAVAILABLE when the queue
//                                             // is full (the save is dropped and counted,
//                                             // the forward pass never waits)
//   ... later: if (auto done = engine->Poll(id)) { the request's blocks may be freed }
//
// Per stage: one BatchExists round trip finds the chunks the pool already holds (skipped),
// then the missing ones are packed and put window by window. Each stage object is put in
// the eviction group of its chunk, so a chunk's P stage objects are evicted together.
// The stage workers, their packer and staging, the request table, Poll and Wait are
// StageJobs' (stage_jobs.h): a save's stage is one of its jobs; this engine keeps the stage
// body and the outcome.
// REQUIRES of the caller: the KV of the submitted tokens is complete in the caches (e.g. the
// forward pass's stream was synchronised) and those blocks are neither freed nor rewritten
// until the save's outcome has been taken.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_store.h"
#include "connector/connector_metrics.h"
#include "connector/kv_namespace.h"
#include "connector/stage_jobs.h"
#include "connector/staging_buffer.h"

namespace kvpool::connector {

struct SaveOptions {
  // Saves submitted and not yet taken; Submit beyond it is refused (back-pressure, counted).
  size_t max_pending_requests = 64;
  // Registered staging per stage; must hold at least one stage object.
  uint64_t staging_bytes_per_stage = uint64_t{64} << 20;
  // A save's stages put their objects one after another, in stage order, instead of at once:
  // the pool then gets every save's calls in one order, which a replay needs for the same seed
  // to give the same pool (its eviction order among objects of one instant is their order).
  bool stages_in_order = false;
};

struct SaveOutcome {
  uint64_t request_id = 0;
  Status status;             // first failure, if any (a failed chunk is simply not in the pool)
  uint64_t objects_put = 0;  // stage objects written
  uint64_t objects_skipped = 0;  // already in the pool
  uint64_t objects_failed = 0;
};

class SaveEngine {
 public:
  // REQUIRES: `store` and `metrics` (if not null) outlive the engine.
  static Result<std::unique_ptr<SaveEngine>> Create(ChunkStore* store, KvNamespace ns, std::vector<StageDevice> stages,
                                                    SaveOptions options, ConnectorMetrics* metrics);
  ~SaveEngine();  // drops queued saves and joins the workers
  SaveEngine(const SaveEngine&) = delete;
  SaveEngine& operator=(const SaveEngine&) = delete;

  // Queues saving every full chunk of `tokens` from chunk `first_chunk` on (earlier chunks
  // are known to be in the pool, e.g. restored from it). block_tables[s] covers every full
  // chunk. Errors: INVALID_ARGUMENT, ALREADY_EXISTS (id pending), UNAVAILABLE (queue full).
  Status Submit(uint64_t request_id, std::span<const TokenId> tokens, std::vector<std::vector<BlockId>> block_tables,
                uint64_t first_chunk = 0);
  // The outcome once every stage finished, else nullopt; handed out once. Unknown ids give
  // an outcome with NOT_FOUND.
  std::optional<SaveOutcome> Poll(uint64_t request_id);
  // Blocks until Poll would answer, or until `deadline`: then it returns an outcome with
  // NOT_READY (and nothing else set), and the save goes on: it may still read the request's
  // blocks, and answers a later Poll or Wait. A save runs its stages' pool calls, each bounded
  // by the client's deadlines.
  SaveOutcome Wait(uint64_t request_id, std::chrono::steady_clock::time_point deadline);

 private:
  struct Request;
  SaveEngine(ChunkStore* store, KvNamespace ns, SaveOptions options, ConnectorMetrics* metrics);
  // StageJobs' body: saves one stage of a request.
  void SaveStage(const StageJobs::Job& job, StageJobs::Worker& worker);

  ChunkStore* const store_;
  const KvNamespace ns_;
  const SaveOptions options_;
  ConnectorMetrics* const metrics_;
  ConnectorMetrics own_metrics_;
  std::unique_ptr<StageJobs> jobs_;  // one worker per stage runs SaveStage; reset first in ~SaveEngine
};

}  // namespace kvpool::connector
