#include "connector/save_engine.h"

#include <fmt/format.h>

#include "connector/chunk_packing.h"
#include "connector/first_tokens_marker.h"

namespace kvpool::connector {

struct SaveEngine::Request : StageJobs::Request {
  std::vector<ChunkKey> keys;  // every full chunk of the request
  uint64_t first_chunk = 0;
  std::vector<std::vector<BlockId>> block_tables;
  std::string marker_key;  // saving chunk 0: its first-tokens marker (first_tokens_marker.h)

  SaveOutcome outcome;  // guarded by mu
};

SaveEngine::SaveEngine(ChunkStore* store, KvNamespace ns, SaveOptions options, ConnectorMetrics* metrics)
    : store_(store), ns_(std::move(ns)), options_(options), metrics_(metrics ? metrics : &own_metrics_) {}

Result<std::unique_ptr<SaveEngine>> SaveEngine::Create(ChunkStore* store, KvNamespace ns,
                                                       std::vector<StageDevice> stages, SaveOptions options,
                                                       ConnectorMetrics* metrics) {
  std::unique_ptr<SaveEngine> engine(new SaveEngine(store, ns, options, metrics));
  StageJobsOptions jo;
  jo.noun = "save";
  jo.workers_per_stage = 1;
  jo.staging_bytes_per_stage = options.staging_bytes_per_stage;
  jo.max_requests = options.max_pending_requests;
  SaveEngine* e = engine.get();
  auto jobs = StageJobs::Create(
      store, ns.spec(), std::move(stages), jo,
      [e](const StageJobs::Job& job, StageJobs::Worker& worker) { e->SaveStage(job, worker); },
      [e](StageJobs::Request&, bool) { e->metrics_->saves_finished.fetch_add(1, std::memory_order_relaxed); });
  if (!jobs.ok()) return jobs.status();
  engine->jobs_ = std::move(jobs).value();
  return engine;
}

SaveEngine::~SaveEngine() { jobs_.reset(); }

Status SaveEngine::Submit(uint64_t request_id, std::span<const TokenId> tokens,
                          std::vector<std::vector<BlockId>> block_tables, uint64_t first_chunk) {
  const uint32_t stages = jobs_->num_stages();
  if (block_tables.size() != stages) {
    return InvalidArgument(
        fmt::format("save {}: {} block tables for {} stages", request_id, block_tables.size(), stages));
  }
  auto r = std::make_shared<Request>();
  r->id = request_id;
  r->keys = ChainChunkKeys(ns_, tokens);
  r->first_chunk = std::min<uint64_t>(first_chunk, r->keys.size());
  if (r->first_chunk == 0 && !r->keys.empty()) r->marker_key = FirstTokensMarkerKey(tokens);
  r->outcome.request_id = request_id;
  const uint64_t chunks = r->keys.size() - r->first_chunk;
  for (uint32_t s = 0; s < stages && chunks > 0; ++s) {
    ChunkTransfer t;
    t.cache = &jobs_->stage(s).device.cache;
    t.block_table = block_tables[s];
    t.chunk_tokens = ns_.spec().chunk_tokens;
    t.first_chunk = r->first_chunk;
    t.num_chunks = chunks;
    t.staging = jobs_->stage(s).staging->data();
    Status st = CheckChunkTransfer(t);
    if (!st.ok()) return InvalidArgument(fmt::format("save {} stage {}: {}", request_id, s, st.message()));
  }
  r->block_tables = std::move(block_tables);
  // One job per stage, even with no chunk to save.
  const std::vector<uint64_t> jobs(stages, 1);
  if (Status st = jobs_->Add(r, jobs); !st.ok()) {
    if (st.code() != StatusCode::kUnavailable) return st;
    metrics_->save_rejected_queue_full.fetch_add(1, std::memory_order_relaxed);
    return Unavailable(st.message() + "; dropped so the forward pass does not wait");
  }
  metrics_->saves_submitted.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

void SaveEngine::SaveStage(const StageJobs::Job& job, StageJobs::Worker& worker) {
  Request& r = static_cast<Request&>(*job.request);
  const StageJobs::Stage& stage = *worker.stage;
  const uint32_t s = stage.index;
  if (options_.stages_in_order) {
    // Stages finish in order, so the ones done are those before this one when it is its turn.
    std::unique_lock<std::mutex> lock(r.mu);
    r.changed.wait(lock, [&] { return r.cancelled || r.jobs - r.jobs_pending == s; });
    if (r.cancelled) return;  // the engine is going
  }
  if (worker.packer == nullptr) {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.outcome.status.ok()) r.outcome.status = worker.packer_status;
    return;
  }
  ChunkPacker& packer = *worker.packer;
  std::vector<std::string> keys, groups;
  for (uint64_t c = r.first_chunk; c < r.keys.size(); ++c) {
    keys.push_back(StageObjectKey(ns_, r.keys[c], s));
    groups.push_back(ChunkGroupName(ns_, r.keys[c]));
  }
  uint64_t put = 0, skipped = 0, failed = 0;
  Status first_error;
  auto note = [&first_error, s](const Status& st) {
    if (first_error.ok()) first_error = Status(st.code(), fmt::format("stage {}: {}", s, st.message()));
  };
  Result<std::vector<bool>> exists = store_->Exists(keys);
  if (!exists.ok()) note(exists.status());  // still try: puts of existing keys answer ALREADY_EXISTS
  std::vector<uint64_t> missing;  // request-relative chunk indices
  for (uint64_t i = 0; i < keys.size(); ++i) {
    if (exists.ok() && exists.value()[i]) {
      ++skipped;
    } else {
      missing.push_back(i);
    }
  }
  for (size_t begin = 0; begin < missing.size(); begin += stage.slot_chunks) {
    const size_t end = std::min(missing.size(), begin + static_cast<size_t>(stage.slot_chunks));
    std::vector<std::string> wkeys, wgroups;
    std::vector<client::ValueView> values;
    Status pack_status;
    for (size_t j = begin; j < end; ++j) {
      std::byte* dst = worker.slot + (j - begin) * stage.object_bytes;
      ChunkTransfer t;
      t.cache = &stage.device.cache;
      t.block_table = r.block_tables[s];
      t.chunk_tokens = ns_.spec().chunk_tokens;
      t.first_chunk = r.first_chunk + missing[j];
      t.num_chunks = 1;
      t.staging = dst;
      pack_status = packer.Pack(t);
      if (!pack_status.ok()) break;
      wkeys.push_back(keys[missing[j]]);
      wgroups.push_back(groups[missing[j]]);
      values.emplace_back(dst, stage.object_bytes);
    }
    Status waited = packer.Wait();
    if (pack_status.ok()) pack_status = waited;
    if (!pack_status.ok()) {
      note(pack_status);
      failed += end - begin;
      continue;
    }
    std::vector<Status> results = store_->Put(wkeys, values, wgroups);
    for (const Status& st : results) {
      if (st.ok()) {
        ++put;
      } else if (st.code() == StatusCode::kAlreadyExists) {
        ++skipped;  // another request saved it since our Exists check
      } else {
        ++failed;
        note(st);
      }
    }
  }
  // Stage 0 putting chunk 0 (not found before) marks which namespace saved these first tokens,
  // best effort: a marker another namespace put first stays (objects are immutable).
  if (s == 0 && !r.marker_key.empty() && !missing.empty() && missing.front() == 0) {
    const std::string text = KvNamespace::CanonicalText(ns_.spec());
    const std::string marker_keys[] = {r.marker_key}, no_group[] = {""};
    const client::ValueView marker_values[] = {std::as_bytes(std::span(text))};
    (void)store_->Put(marker_keys, marker_values, no_group);
  }
  metrics_->save_objects_put.fetch_add(put, std::memory_order_relaxed);
  metrics_->save_objects_skipped.fetch_add(skipped, std::memory_order_relaxed);
  metrics_->save_objects_failed.fetch_add(failed, std::memory_order_relaxed);
  metrics_->save_bytes.fetch_add(put * stage.object_bytes, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(r.mu);
  r.outcome.objects_put += put;
  r.outcome.objects_skipped += skipped;
  r.outcome.objects_failed += failed;
  if (!first_error.ok() && r.outcome.status.ok()) r.outcome.status = first_error;
}

std::optional<SaveOutcome> SaveEngine::Poll(uint64_t request_id) { return jobs_->PollOutcome<Request>(request_id); }

SaveOutcome SaveEngine::Wait(uint64_t request_id, std::chrono::steady_clock::time_point deadline) {
  return jobs_->WaitOutcome<Request>(request_id, deadline);
}

}  // namespace kvpool::connector
