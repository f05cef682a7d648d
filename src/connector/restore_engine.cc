#include "connector/restore_engine.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_packing.h"

namespace kvpool::connector {

using Clock = std::chrono::steady_clock;

namespace {

// The workers hash too: helpers make up the rest of checksum_threads. By default every core
// has one thread (more slow the copies they share memory with; on a 16-core H200 host, CPU
// restore with 8 workers: 8 helpers cost +11%, 4 helpers +19%, 16 helpers +31%).
int ChecksumHelpers(const RestoreOptions& o) {
  const int threads = o.checksum_threads > 0 ? o.checksum_threads : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(0, threads - static_cast<int>(o.workers_per_stage));
}

}  // namespace

struct RestoreEngine::Request {
  uint64_t id = 0;
  PrefixHit hit;
  std::vector<std::vector<BlockId>> block_tables;
  Clock::time_point submitted;
  Clock::time_point deadline;

  std::mutex mu;
  std::condition_variable changed;
  uint64_t windows_pending = 0;                      // guarded by mu
  std::vector<uint64_t> stage_windows_pending;       // [stage]; guarded by mu
  std::vector<std::vector<uint64_t>> window_chunks;  // [stage][window] chunks unpacked; guarded by mu
  Status first_error;                                // guarded by mu
  bool cancelled = false;                            // guarded by mu; no unpack starts once set
  uint32_t unpacks_running = 0;                      // guarded by mu
  bool finished = false;                             // guarded by mu
};

struct RestoreEngine::Window {
  std::shared_ptr<Request> request;
  uint32_t stage = 0;
  uint64_t index = 0;        // window number within the stage
  uint64_t first_hit = 0;    // hit-relative chunk index
  uint64_t chunks = 0;
};

struct RestoreEngine::Stage {
  uint32_t index = 0;
  StageDevice device;
  uint64_t object_bytes = 0;
  uint64_t slot_bytes = 0;
  uint64_t window_chunks = 0;
  std::unique_ptr<StagingBuffer> staging;
  std::deque<Window> queue;  // guarded by RestoreEngine::mu_
  std::condition_variable wake;
  std::vector<std::thread> workers;
};

RestoreEngine::RestoreEngine(ChunkStore* store, KvNamespace ns, RestoreOptions options, ConnectorMetrics* metrics)
    : store_(store),
      ns_(std::move(ns)),
      options_(options),
      metrics_(metrics ? metrics : &own_metrics_),
      checksum_pool_(std::make_unique<HelperPool>(ChecksumHelpers(options))) {}

Result<std::unique_ptr<RestoreEngine>> RestoreEngine::Create(ChunkStore* store, KvNamespace ns,
                                                             std::vector<StageDevice> stages, RestoreOptions options,
                                                             ConnectorMetrics* metrics) {
  const KvModelSpec& spec = ns.spec();
  if (stages.size() != spec.num_stages()) {
    return InvalidArgument(fmt::format("restore engine: {} stage devices for {} stages", stages.size(),
                                       spec.num_stages()));
  }
  if (options.workers_per_stage == 0) return InvalidArgument("restore engine: workers_per_stage is 0");
  std::unique_ptr<RestoreEngine> engine(new RestoreEngine(store, ns, options, metrics));
  for (uint32_t s = 0; s < stages.size(); ++s) {
    auto stage = std::make_unique<Stage>();
    stage->index = s;
    stage->device = std::move(stages[s]);
    KVPOOL_RETURN_IF_ERROR(stage->device.cache.Validate());
    const PagedKvLayout& layout = stage->device.cache.layout;
    if (layout.packed_chunk_bytes(spec.chunk_tokens) != spec.stage_object_bytes(s)) {
      return InvalidArgument(fmt::format("restore engine: stage {} cache layout does not match the KV spec", s));
    }
    stage->object_bytes = spec.stage_object_bytes(s);
    stage->slot_bytes = options.staging_bytes_per_stage / options.workers_per_stage;
    stage->window_chunks = stage->slot_bytes / stage->object_bytes;
    if (stage->window_chunks == 0) {
      return InvalidArgument(fmt::format("restore engine: stage {} staging share {} B is below one object ({} B)", s,
                                         stage->slot_bytes, stage->object_bytes));
    }
    auto staging = StagingBuffer::Allocate(store, options.staging_bytes_per_stage, stage->device.cuda_device);
    if (!staging.ok()) return staging.status();
    stage->staging = std::move(staging.value());
    engine->stages_.push_back(std::move(stage));
  }
  for (auto& stage : engine->stages_) {
    for (uint32_t w = 0; w < options.workers_per_stage; ++w) {
      stage->workers.emplace_back([e = engine.get(), st = stage.get(), w] { e->WorkerLoop(st, w); });
    }
  }
  return engine;
}

RestoreEngine::~RestoreEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  for (auto& stage : stages_) stage->wake.notify_all();
  for (auto& stage : stages_) {
    for (std::thread& t : stage->workers) t.join();
  }
}

Status RestoreEngine::Start(uint64_t request_id, const PrefixHit& hit, std::vector<std::vector<BlockId>> block_tables) {
  if (block_tables.size() != stages_.size()) {
    return InvalidArgument(fmt::format("restore {}: {} block tables for {} stages", request_id, block_tables.size(),
                                       stages_.size()));
  }
  if (hit.num_stages != stages_.size() || hit.chunk_tokens != ns_.spec().chunk_tokens) {
    return InvalidArgument(fmt::format("restore {}: the hit was looked up for another layout", request_id));
  }
  auto r = std::make_shared<Request>();
  r->id = request_id;
  r->hit = hit;
  r->submitted = Clock::now();
  r->deadline = r->submitted + options_.timeout;
  r->window_chunks.resize(stages_.size());
  // Check every block the restore will write before anything runs: a bad table is the
  // caller's error, reported now, never a write outside the cache.
  for (uint32_t s = 0; s < stages_.size() && hit.hit_chunks > 0; ++s) {
    ChunkTransfer t;
    t.cache = &stages_[s]->device.cache;
    t.block_table = block_tables[s];
    t.chunk_tokens = hit.chunk_tokens;
    t.first_chunk = hit.first_chunk;
    t.num_chunks = hit.hit_chunks;
    t.staging = stages_[s]->staging->data();
    Status st = CheckChunkTransfer(t);
    if (!st.ok()) return InvalidArgument(fmt::format("restore {} stage {}: {}", request_id, s, st.message()));
  }
  r->block_tables = std::move(block_tables);

  std::vector<Window> windows;
  for (uint32_t s = 0; s < stages_.size(); ++s) {
    const uint64_t per = stages_[s]->window_chunks;
    const uint64_t n = (hit.hit_chunks + per - 1) / per;
    r->window_chunks[s].assign(n, 0);
    for (uint64_t w = 0; w < n; ++w) {
      windows.push_back(Window{r, s, w, w * per, std::min(per, hit.hit_chunks - w * per)});
    }
  }
  r->windows_pending = windows.size();
  r->stage_windows_pending.resize(stages_.size());
  for (uint32_t s = 0; s < stages_.size(); ++s) r->stage_windows_pending[s] = r->window_chunks[s].size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (requests_.count(request_id)) {
      return AlreadyExists(fmt::format("restore {}: a restore with this id is in progress", request_id));
    }
    for (uint32_t s = 0; s < stages_.size(); ++s) {
      const size_t add = r->window_chunks[s].size();
      if (stages_[s]->queue.size() + add > options_.max_queued_windows_per_stage) {
        metrics_->restore_rejected_queue_full.fetch_add(1, std::memory_order_relaxed);
        return Unavailable(fmt::format("restore {}: stage {} restore queue is full; compute instead", request_id, s));
      }
    }
    requests_[request_id] = r;
    for (Window& w : windows) stages_[w.stage]->queue.push_back(std::move(w));
  }
  metrics_->restores_started.fetch_add(1, std::memory_order_relaxed);
  for (auto& stage : stages_) stage->wake.notify_all();
  return Status::Ok();
}

void RestoreEngine::WorkerLoop(Stage* stage, uint32_t worker) {
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
  std::byte* slot = stage->staging->data() + worker * stage->slot_bytes;
  for (;;) {
    Window w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stage->wake.wait(lock, [&] { return stopping_ || !stage->queue.empty(); });
      if (stopping_) return;
      w = std::move(stage->queue.front());
      stage->queue.pop_front();
      ++windows_running_;
    }
    if (packer) {
      RunWindow(w, *packer, slot);
    } else {
      std::lock_guard<std::mutex> lock(w.request->mu);
      if (w.request->first_error.ok()) w.request->first_error = packer_status;
      WindowReported(*w.request, w.stage);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --windows_running_;
    }
    idle_.notify_all();
  }
}

void RestoreEngine::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] {
    if (windows_running_ > 0) return false;
    for (const auto& stage : stages_) {
      if (!stage->queue.empty()) return false;
    }
    return true;
  });
}

void RestoreEngine::RunWindow(const Window& w, ChunkPacker& packer, std::byte* slot) {
  Request& r = *w.request;
  uint64_t unpacked = 0;
  Status status;
  bool skip;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    skip = r.cancelled || Clock::now() >= r.deadline;
  }
  if (skip) {
    status = Timeout("restore wait ran out before this window was read");
  } else {
    std::vector<transfer::MappedRange> mapped;
    unpacked = MapWindow(w, mapped) ? UnpackMapped(w, packer, mapped, status) : ReadAndUnpack(w, packer, slot, status);
  }
  std::lock_guard<std::mutex> lock(r.mu);
  r.window_chunks[w.stage][w.index] = unpacked;
  if (!status.ok() && r.first_error.ok()) {
    r.first_error = Status(status.code(), fmt::format("stage {}: {}", w.stage, status.message()));
  }
  WindowReported(r, w.stage);
}

void RestoreEngine::WindowReported(Request& r, uint32_t stage) {
  --r.windows_pending;
  if (--r.stage_windows_pending[stage] == 0) {
    metrics_->restore_stage(stage).Observe(std::chrono::duration<double>(Clock::now() - r.submitted).count());
  }
  r.changed.notify_all();
}

bool RestoreEngine::MapWindow(const Window& w, std::vector<transfer::MappedRange>& mapped) {
  if (!options_.unpack_from_mapped_segments) return false;
  const Request& r = *w.request;
  const Stage& stage = *stages_[w.stage];
  mapped.reserve(w.chunks);
  for (uint64_t i = 0; i < w.chunks; ++i) {
    Result<transfer::MappedRange> m = store_->Map(*r.hit.lookup, r.hit.lookup_index(w.first_hit + i, w.stage));
    if (!m.ok() || m->length != stage.object_bytes) return false;
    if (stage.device.cuda_device >= 0 && !pins_.Pin(m->mapping).ok()) return false;
    mapped.push_back(std::move(m.value()));
  }
  return true;
}

bool RestoreEngine::BeginUnpack(Request& r) {
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.cancelled) return false;
  ++r.unpacks_running;
  return true;
}

void RestoreEngine::EndUnpack(Request& r) {
  std::lock_guard<std::mutex> lock(r.mu);
  --r.unpacks_running;
  r.changed.notify_all();
}

uint64_t RestoreEngine::UnpackMapped(const Window& w, ChunkPacker& packer, std::vector<transfer::MappedRange>& mapped,
                                     Status& status) {
  Request& r = *w.request;
  Stage& stage = *stages_[w.stage];
  if (!BeginUnpack(r)) {
    status = Timeout("restore wait ran out before this window was unpacked");
    return 0;
  }
  // Chunks lie anywhere in the segments: one unpack per chunk, all queued before one wait.
  // Checked against their writers' checksums: a CUDA packer hashes each object on the GPU
  // after its DMA; otherwise the checksum pool hashes them meanwhile (the CPU packer on this
  // thread copies the same bytes).
  const bool verify = options_.verify_checksums;
  const bool packer_hashes = verify && packer.HashesObjects();
  std::vector<uint64_t> sums(w.chunks);
  std::vector<std::span<const std::byte>> objects;
  std::unique_ptr<BackgroundChecksums> hashing;
  if (verify && !packer_hashes) {
    for (const transfer::MappedRange& m : mapped) objects.emplace_back(m.data, m.length);
    hashing = std::make_unique<BackgroundChecksums>(*checksum_pool_, objects, sums);
  }
  Status s;
  for (uint64_t i = 0; i < w.chunks && s.ok(); ++i) {
    ChunkTransfer t;
    t.cache = &stage.device.cache;
    t.block_table = r.block_tables[w.stage];
    t.chunk_tokens = r.hit.chunk_tokens;
    t.first_chunk = r.hit.first_chunk + w.first_hit + i;
    t.num_chunks = 1;
    t.keep_tokens_below = r.hit.gpu_cached_tokens;
    t.staging = const_cast<std::byte*>(mapped[i].data);  // Unpack only reads it
    t.checksums = packer_hashes ? &sums[i] : nullptr;
    s = packer.Unpack(t);
  }
  if (hashing) hashing->Wait();  // helps hash while the GPU copies
  Status waited = packer.Wait();
  if (s.ok()) s = waited;
  // Invariant 1: bytes read after the lease ended, or from a segment its store withdrew, may
  // belong to another object by now. Checked after the last byte was read.
  if (s.ok() && Clock::now() >= r.hit.lookup->lease_deadline()) s = Timeout("unpack finished after its lease ended");
  for (uint64_t i = 0; i < w.chunks && s.ok(); ++i) {
    if (!mapped[i].mapping->served()) s = Stale("a storage service withdrew its segment during the unpack");
  }
  EndUnpack(r);
  if (!s.ok()) {
    status = s;
    return 0;
  }
  const uint64_t verified = verify ? VerifiedPrefix(w, sums, status) : w.chunks;
  metrics_->restore_bytes.fetch_add(verified * stage.object_bytes, std::memory_order_relaxed);
  metrics_->restore_mapped_bytes.fetch_add(verified * stage.object_bytes, std::memory_order_relaxed);
  return verified;
}

uint64_t RestoreEngine::ReadAndUnpack(const Window& w, ChunkPacker& packer, std::byte* slot, Status& status) {
  Request& r = *w.request;
  Stage& stage = *stages_[w.stage];
  std::vector<size_t> indices(w.chunks);
  std::vector<client::ValueBuffer> buffers(w.chunks);
  for (uint64_t i = 0; i < w.chunks; ++i) {
    indices[i] = r.hit.lookup_index(w.first_hit + i, w.stage);
    buffers[i] = client::ValueBuffer(slot + i * stage.object_bytes, stage.object_bytes);
  }
  // The checksums are checked by a CUDA packer on its GPU after the DMA, else by the read: the
  // transport hashes each object as it lands in staging. Either way no byte is read from
  // host memory twice for it.
  const bool packer_hashes = options_.verify_checksums && packer.HashesObjects();
  const client::ChecksumCheck check = options_.verify_checksums && !packer_hashes ? client::ChecksumCheck::kBeforeAnswer
                                                                                  : client::ChecksumCheck::kNone;
  std::vector<Result<uint64_t>> read = store_->Read(*r.hit.lookup, indices, buffers, check);
  // Only a gap-free prefix of the window is usable.
  uint64_t ok = 0;
  while (ok < w.chunks && ok < read.size() && read[ok].ok() && read[ok].value() == stage.object_bytes) ++ok;
  if (ok < w.chunks) {
    status = ok < read.size() && !read[ok].ok()
                 ? read[ok].status()
                 : Internal(fmt::format("chunk {} of stage {} has the wrong size", w.first_hit + ok, w.stage));
    if (status.code() == StatusCode::kCorrupt) DropCorruptObject(w, ok);
  }
  metrics_->restore_bytes.fetch_add(ok * stage.object_bytes, std::memory_order_relaxed);
  if (ok == 0) return 0;
  if (!BeginUnpack(r)) {
    status = Timeout("restore wait ran out before this window was unpacked");
    return 0;
  }
  std::vector<uint64_t> sums(packer_hashes ? ok : 0);
  ChunkTransfer t;
  t.cache = &stage.device.cache;
  t.block_table = r.block_tables[w.stage];
  t.chunk_tokens = r.hit.chunk_tokens;
  t.first_chunk = r.hit.first_chunk + w.first_hit;
  t.num_chunks = ok;
  t.keep_tokens_below = r.hit.gpu_cached_tokens;
  t.staging = slot;
  t.checksums = packer_hashes ? sums.data() : nullptr;
  Status s = packer.Unpack(t);
  Status waited = packer.Wait();
  if (s.ok()) s = waited;
  EndUnpack(r);
  if (!s.ok()) {
    status = s;
    return 0;
  }
  return packer_hashes ? VerifiedPrefix(w, sums, status) : ok;
}

uint64_t RestoreEngine::VerifiedPrefix(const Window& w, std::span<const uint64_t> sums, Status& status) {
  const client::LookupResult& lookup = *w.request->hit.lookup;
  for (uint64_t i = 0; i < sums.size(); ++i) {
    if (sums[i] != lookup.checksum(w.request->hit.lookup_index(w.first_hit + i, w.stage))) {
      DropCorruptObject(w, i);
      status = Corrupt(fmt::format("chunk {} of stage {} does not match its checksum", w.first_hit + i, w.stage));
      return i;
    }
  }
  return sums.size();
}

void RestoreEngine::DropCorruptObject(const Window& w, uint64_t i) {
  metrics_->restore_corrupt_objects.fetch_add(1, std::memory_order_relaxed);
  // Dropped, best effort: left in the pool it would be every later reader's miss, and the
  // save after this restore would find it present and not put it again.
  const PrefixHit& hit = w.request->hit;
  const std::string key = StageObjectKey(ns_, hit.chunk_keys[hit.first_chunk + w.first_hit + i], w.stage);
  const std::vector<Status> removed = store_->Remove(std::span(&key, 1));
  spdlog::warn("restore: {} does not match its checksum; {}", key,
               removed.at(0).ok() ? "dropped from the pool" : "could not drop it: " + removed.at(0).ToString());
}

std::optional<RestoreOutcome> RestoreEngine::TryFinish(Request& r, std::unique_lock<std::mutex>& lock,
                                                       bool force_deadline) {
  RestoreOutcome out;
  out.request_id = r.id;
  out.planned_tokens = r.hit.restorable_tokens();
  if (r.windows_pending == 0) {
    // Every stage holds chunks up to its first short window; the request holds the minimum.
    uint64_t common = r.hit.hit_chunks;
    for (size_t s = 0; s < r.window_chunks.size(); ++s) {
      const uint64_t per = stages_[s]->window_chunks;
      uint64_t got = 0;
      for (uint64_t n : r.window_chunks[s]) {
        got += n;
        if (n < per) break;
      }
      common = std::min(common, got);
    }
    out.status = r.first_error;
    out.end_token = common ? (r.hit.first_chunk + common) * r.hit.chunk_tokens : r.hit.gpu_cached_tokens;
    out.end_token = std::max(out.end_token, r.hit.gpu_cached_tokens);
  } else if (force_deadline || Clock::now() >= r.deadline) {
    // Bounded wait ran out: cancel, then wait only for unpacks already writing the cache.
    r.cancelled = true;
    r.changed.wait(lock, [&] { return r.unpacks_running == 0; });
    metrics_->restore_timeouts.fetch_add(1, std::memory_order_relaxed);
    out.status = Timeout(fmt::format("restore {} did not finish within {} ms; computing instead", r.id,
                                     options_.timeout.count()));
    out.end_token = r.hit.gpu_cached_tokens;
  } else {
    return std::nullopt;
  }
  r.cancelled = true;  // late windows (timeout case) must not write any more
  r.finished = true;
  out.restored_tokens = out.end_token - r.hit.gpu_cached_tokens;
  metrics_->restores_finished.fetch_add(1, std::memory_order_relaxed);
  metrics_->restore_seconds.Observe(std::chrono::duration<double>(Clock::now() - r.submitted).count());
  metrics_->restore_tokens.fetch_add(out.restored_tokens, std::memory_order_relaxed);
  if (out.fell_back()) {
    metrics_->restore_fallbacks.fetch_add(1, std::memory_order_relaxed);
    metrics_->restore_fallback_tokens.fetch_add(out.planned_tokens - out.restored_tokens, std::memory_order_relaxed);
  }
  return out;
}

std::optional<RestoreOutcome> RestoreEngine::Poll(uint64_t request_id) {
  std::shared_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) {
      RestoreOutcome out;
      out.request_id = request_id;
      out.status = NotFound(fmt::format("no restore {} in progress", request_id));
      return out;
    }
    r = it->second;
  }
  std::optional<RestoreOutcome> out;
  {
    std::unique_lock<std::mutex> lock(r->mu);
    if (r->finished) return std::nullopt;  // another thread is handing it out
    out = TryFinish(*r, lock, false);
  }
  if (out) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.erase(request_id);
  }
  return out;
}

RestoreOutcome RestoreEngine::Wait(uint64_t request_id) {
  std::shared_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(request_id);
    if (it != requests_.end()) r = it->second;
  }
  if (r) {
    std::unique_lock<std::mutex> lock(r->mu);
    r->changed.wait_until(lock, r->deadline, [&] { return r->windows_pending == 0 || r->finished; });
  }
  for (;;) {
    if (auto out = Poll(request_id)) return *out;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // another thread is finishing it
  }
}

}  // namespace kvpool::connector
