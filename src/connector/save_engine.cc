#include "connector/save_engine.h"

#include <fmt/format.h>

#include "connector/chunk_packing.h"
#include "connector/first_tokens_marker.h"

namespace kvpool::connector {

struct SaveEngine::Request {
  uint64_t id = 0;
  std::vector<ChunkKey> keys;  // every full chunk of the request
  uint64_t first_chunk = 0;
  std::vector<std::vector<BlockId>> block_tables;
  std::string marker_key;  // saving chunk 0: its first-tokens marker (first_tokens_marker.h)

  std::mutex mu;
  std::condition_variable changed;
  uint32_t stages_pending = 0;  // guarded by mu
  bool abandoned = false;       // the engine is going: a stage waiting its turn stops; guarded by mu
  SaveOutcome outcome;          // guarded by mu
};

struct SaveEngine::Stage {
  uint32_t index = 0;
  StageDevice device;
  uint64_t object_bytes = 0;
  uint64_t window_chunks = 0;
  std::unique_ptr<StagingBuffer> staging;
  std::deque<std::shared_ptr<Request>> queue;  // guarded by SaveEngine::mu_
  std::condition_variable wake;
  std::thread worker;
};

SaveEngine::SaveEngine(ChunkStore* store, KvNamespace ns, SaveOptions options, ConnectorMetrics* metrics)
    : store_(store), ns_(std::move(ns)), options_(options), metrics_(metrics ? metrics : &own_metrics_) {}

Result<std::unique_ptr<SaveEngine>> SaveEngine::Create(ChunkStore* store, KvNamespace ns,
                                                       std::vector<StageDevice> stages, SaveOptions options,
                                                       ConnectorMetrics* metrics) {
  const KvModelSpec& spec = ns.spec();
  if (stages.size() != spec.num_stages()) {
    return InvalidArgument(fmt::format("save engine: {} stage devices for {} stages", stages.size(),
                                       spec.num_stages()));
  }
  std::unique_ptr<SaveEngine> engine(new SaveEngine(store, ns, options, metrics));
  for (uint32_t s = 0; s < stages.size(); ++s) {
    auto stage = std::make_unique<Stage>();
    stage->index = s;
    stage->device = std::move(stages[s]);
    KVPOOL_RETURN_IF_ERROR(stage->device.cache.Validate());
    if (stage->device.cache.layout.packed_chunk_bytes(spec.chunk_tokens) != spec.stage_object_bytes(s)) {
      return InvalidArgument(fmt::format("save engine: stage {} cache layout does not match the KV spec", s));
    }
    stage->object_bytes = spec.stage_object_bytes(s);
    stage->window_chunks = options.staging_bytes_per_stage / stage->object_bytes;
    if (stage->window_chunks == 0) {
      return InvalidArgument(fmt::format("save engine: stage {} staging {} B is below one object ({} B)", s,
                                         options.staging_bytes_per_stage, stage->object_bytes));
    }
    auto staging = StagingBuffer::Allocate(store, options.staging_bytes_per_stage, stage->device.cuda_device);
    if (!staging.ok()) return staging.status();
    stage->staging = std::move(staging.value());
    engine->stages_.push_back(std::move(stage));
  }
  for (auto& stage : engine->stages_) {
    stage->worker = std::thread([e = engine.get(), st = stage.get()] { e->WorkerLoop(st); });
  }
  return engine;
}

SaveEngine::~SaveEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, r] : requests_) {
      std::lock_guard<std::mutex> request_lock(r->mu);
      r->abandoned = true;
      r->changed.notify_all();
    }
  }
  for (auto& stage : stages_) stage->wake.notify_all();
  for (auto& stage : stages_) stage->worker.join();
}

Status SaveEngine::Submit(uint64_t request_id, std::span<const TokenId> tokens,
                          std::vector<std::vector<BlockId>> block_tables, uint64_t first_chunk) {
  if (block_tables.size() != stages_.size()) {
    return InvalidArgument(fmt::format("save {}: {} block tables for {} stages", request_id, block_tables.size(),
                                       stages_.size()));
  }
  auto r = std::make_shared<Request>();
  r->id = request_id;
  r->keys = ChainChunkKeys(ns_, tokens);
  r->first_chunk = std::min<uint64_t>(first_chunk, r->keys.size());
  if (r->first_chunk == 0 && !r->keys.empty()) r->marker_key = FirstTokensMarkerKey(tokens);
  r->outcome.request_id = request_id;
  const uint64_t chunks = r->keys.size() - r->first_chunk;
  for (uint32_t s = 0; s < stages_.size() && chunks > 0; ++s) {
    ChunkTransfer t;
    t.cache = &stages_[s]->device.cache;
    t.block_table = block_tables[s];
    t.chunk_tokens = ns_.spec().chunk_tokens;
    t.first_chunk = r->first_chunk;
    t.num_chunks = chunks;
    t.staging = stages_[s]->staging->data();
    Status st = CheckChunkTransfer(t);
    if (!st.ok()) return InvalidArgument(fmt::format("save {} stage {}: {}", request_id, s, st.message()));
  }
  r->block_tables = std::move(block_tables);
  r->stages_pending = static_cast<uint32_t>(stages_.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (requests_.count(request_id)) {
      return AlreadyExists(fmt::format("save {}: a save with this id is pending", request_id));
    }
    if (requests_.size() >= options_.max_pending_requests) {
      metrics_->save_rejected_queue_full.fetch_add(1, std::memory_order_relaxed);
      return Unavailable(fmt::format("save {}: {} saves pending; dropped so the forward pass does not wait",
                                     request_id, requests_.size()));
    }
    requests_[request_id] = r;
    for (auto& stage : stages_) stage->queue.push_back(r);
  }
  metrics_->saves_submitted.fetch_add(1, std::memory_order_relaxed);
  for (auto& stage : stages_) stage->wake.notify_all();
  return Status::Ok();
}

void SaveEngine::WorkerLoop(Stage* stage) {
  std::unique_ptr<ChunkPacker> packer;
  Status packer_status;
  if (stage->device.cuda_device >= 0) {
    auto p = NewCudaChunkPacker(stage->device.cuda_device);
    if (p.ok()) {
      packer = std::move(p.value());
    } else {
      packer_status = p.status();
    }
  } else {
    packer = NewCpuChunkPacker();
  }
  for (;;) {
    std::shared_ptr<Request> r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stage->wake.wait(lock, [&] { return stopping_ || !stage->queue.empty(); });
      if (stopping_) return;
      r = std::move(stage->queue.front());
      stage->queue.pop_front();
    }
    if (options_.stages_in_order) {
      // Stages finish in order, so the ones done are those before this one when it is its turn.
      std::unique_lock<std::mutex> lock(r->mu);
      r->changed.wait(lock, [&] { return r->abandoned || stages_.size() - r->stages_pending == stage->index; });
      if (r->abandoned) return;
    }
    if (packer) {
      SaveStage(*r, *stage, *packer);
    } else {
      std::lock_guard<std::mutex> lock(r->mu);
      if (r->outcome.status.ok()) r->outcome.status = packer_status;
    }
    std::lock_guard<std::mutex> lock(r->mu);
    --r->stages_pending;
    r->changed.notify_all();
  }
}

void SaveEngine::SaveStage(Request& r, Stage& stage, ChunkPacker& packer) {
  const uint32_t s = stage.index;
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
  for (size_t begin = 0; begin < missing.size(); begin += stage.window_chunks) {
    const size_t end = std::min(missing.size(), begin + static_cast<size_t>(stage.window_chunks));
    std::vector<std::string> wkeys, wgroups;
    std::vector<client::ValueView> values;
    Status pack_status;
    for (size_t j = begin; j < end; ++j) {
      std::byte* dst = stage.staging->data() + (j - begin) * stage.object_bytes;
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

std::optional<SaveOutcome> SaveEngine::Poll(uint64_t request_id) {
  std::shared_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) {
      SaveOutcome out;
      out.request_id = request_id;
      out.status = NotFound(fmt::format("no save {} pending", request_id));
      return out;
    }
    r = it->second;
    std::lock_guard<std::mutex> rlock(r->mu);
    if (r->stages_pending > 0) return std::nullopt;
    requests_.erase(it);
  }
  metrics_->saves_finished.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> rlock(r->mu);
  return r->outcome;
}

SaveOutcome SaveEngine::Wait(uint64_t request_id) {
  std::shared_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(request_id);
    if (it != requests_.end()) r = it->second;
  }
  if (r) {
    std::unique_lock<std::mutex> lock(r->mu);
    r->changed.wait(lock, [&] { return r->stages_pending == 0; });
  }
  for (;;) {
    if (auto out = Poll(request_id)) return *out;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace kvpool::connector
