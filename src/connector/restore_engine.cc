#include "connector/restore_engine.h"

#include <algorithm>
#include <thread>

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

struct RestoreEngine::Request : StageJobs::Request {
  PrefixHit hit;
  std::vector<std::vector<BlockId>> block_tables;
  Clock::time_point submitted;

  std::vector<uint64_t> stage_windows_pending;       // [stage]; guarded by mu
  std::vector<std::vector<uint64_t>> window_chunks;  // [stage][window] chunks unpacked; guarded by mu
  Status first_error;                                // guarded by mu
  RestoreOutcome outcome;                            // built by Finish
};

// Job `index` of a request on a stage: the hit's chunks [first_hit, first_hit + chunks).
struct RestoreEngine::Window {
  Request* request = nullptr;
  uint32_t stage = 0;
  uint64_t index = 0;        // window number within the stage
  uint64_t first_hit = 0;    // hit-relative chunk index
  uint64_t chunks = 0;
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
  std::unique_ptr<RestoreEngine> engine(new RestoreEngine(store, ns, options, metrics));
  StageJobsOptions jo;
  jo.noun = "restore";
  jo.workers_per_stage = options.workers_per_stage;
  jo.staging_bytes_per_stage = options.staging_bytes_per_stage;
  jo.max_queued_jobs_per_stage = options.max_queued_windows_per_stage;
  RestoreEngine* e = engine.get();
  auto jobs = StageJobs::Create(
      store, ns.spec(), std::move(stages), jo,
      [e](const StageJobs::Job& job, StageJobs::Worker& worker) { e->RunWindow(job, worker); },
      [e](StageJobs::Request& r, bool ran_out) { e->Finish(static_cast<Request&>(r), ran_out); });
  if (!jobs.ok()) return jobs.status();
  engine->jobs_ = std::move(jobs).value();
  return engine;
}

RestoreEngine::~RestoreEngine() { jobs_.reset(); }

Status RestoreEngine::Start(uint64_t request_id, const PrefixHit& hit, std::vector<std::vector<BlockId>> block_tables) {
  const uint32_t stages = jobs_->num_stages();
  if (block_tables.size() != stages) {
    return InvalidArgument(
        fmt::format("restore {}: {} block tables for {} stages", request_id, block_tables.size(), stages));
  }
  if (hit.num_stages != stages || hit.chunk_tokens != ns_.spec().chunk_tokens) {
    return InvalidArgument(fmt::format("restore {}: the hit was looked up for another layout", request_id));
  }
  auto r = std::make_shared<Request>();
  r->id = request_id;
  r->hit = hit;
  r->submitted = Clock::now();
  r->deadline = r->submitted + options_.timeout;
  r->window_chunks.resize(stages);
  // Check every block the restore will write before anything runs: a bad table is the
  // caller's error, reported now, never a write outside the cache.
  for (uint32_t s = 0; s < stages && hit.hit_chunks > 0; ++s) {
    ChunkTransfer t;
    t.cache = &jobs_->stage(s).device.cache;
    t.block_table = block_tables[s];
    t.chunk_tokens = hit.chunk_tokens;
    t.first_chunk = hit.first_chunk;
    t.num_chunks = hit.hit_chunks;
    t.staging = jobs_->stage(s).staging->data();
    Status st = CheckChunkTransfer(t);
    if (!st.ok()) return InvalidArgument(fmt::format("restore {} stage {}: {}", request_id, s, st.message()));
  }
  r->block_tables = std::move(block_tables);

  // Stage s's windows: as many chunks each as one worker's staging share holds.
  std::vector<uint64_t> windows(stages);
  r->stage_windows_pending.resize(stages);
  for (uint32_t s = 0; s < stages; ++s) {
    const uint64_t per = jobs_->stage(s).slot_chunks;
    windows[s] = (hit.hit_chunks + per - 1) / per;
    r->window_chunks[s].assign(windows[s], 0);
    r->stage_windows_pending[s] = windows[s];
  }
  if (Status st = jobs_->Add(r, windows); !st.ok()) {
    if (st.code() != StatusCode::kUnavailable) return st;
    metrics_->restore_rejected_queue_full.fetch_add(1, std::memory_order_relaxed);
    return Unavailable(st.message() + "; compute instead");
  }
  metrics_->restores_started.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

void RestoreEngine::WaitIdle() { jobs_->WaitIdle(); }

void RestoreEngine::RunWindow(const StageJobs::Job& job, StageJobs::Worker& worker) {
  Request& r = static_cast<Request&>(*job.request);
  const uint64_t per = worker.stage->slot_chunks;
  const Window w{&r, job.stage, job.index, job.index * per, std::min(per, r.hit.hit_chunks - job.index * per)};
  uint64_t unpacked = 0;
  Status status;
  bool skip;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    skip = r.cancelled || Clock::now() >= r.deadline;
  }
  if (worker.packer == nullptr) {
    status = worker.packer_status;
  } else if (skip) {
    status = Timeout("restore wait ran out before this window was read");
  } else {
    std::vector<transfer::MappedRange> mapped;
    unpacked = MapWindow(w, mapped) ? UnpackMapped(w, *worker.packer, mapped, status)
                                    : ReadAndUnpack(w, *worker.packer, worker.slot, status);
  }
  std::lock_guard<std::mutex> lock(r.mu);
  r.window_chunks[w.stage][w.index] = unpacked;
  if (!status.ok() && r.first_error.ok()) {
    r.first_error = Status(status.code(), fmt::format("stage {}: {}", w.stage, status.message()));
  }
  // The stage's last window: its restore time.
  if (--r.stage_windows_pending[w.stage] == 0) {
    metrics_->restore_stage(w.stage).Observe(std::chrono::duration<double>(Clock::now() - r.submitted).count());
  }
}

bool RestoreEngine::MapWindow(const Window& w, std::vector<transfer::MappedRange>& mapped) {
  if (!options_.unpack_from_mapped_segments) return false;
  const Request& r = *w.request;
  const StageJobs::Stage& stage = jobs_->stage(w.stage);
  mapped.reserve(w.chunks);
  for (uint64_t i = 0; i < w.chunks; ++i) {
    Result<transfer::MappedRange> m = store_->Map(*r.hit.lookup, r.hit.lookup_index(w.first_hit + i, w.stage));
    if (!m.ok() || m->length != stage.object_bytes) return false;
    if (stage.device.cuda_device >= 0 && !pins_.Pin(m->mapping).ok()) return false;
    mapped.push_back(std::move(m.value()));
  }
  return true;
}

uint64_t RestoreEngine::UnpackMapped(const Window& w, ChunkPacker& packer, std::vector<transfer::MappedRange>& mapped,
                                     Status& status) {
  Request& r = *w.request;
  const StageJobs::Stage& stage = jobs_->stage(w.stage);
  if (!r.BeginWrite()) {
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
  r.EndWrite();
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
  const StageJobs::Stage& stage = jobs_->stage(w.stage);
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
  if (!r.BeginWrite()) {
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
  r.EndWrite();
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

void RestoreEngine::Finish(Request& r, bool ran_out) {
  RestoreOutcome& out = r.outcome;
  out.request_id = r.id;
  out.planned_tokens = r.hit.restorable_tokens();
  if (!ran_out) {
    // Every stage holds chunks up to its first short window; the request holds the minimum.
    uint64_t common = r.hit.hit_chunks;
    for (uint32_t s = 0; s < r.window_chunks.size(); ++s) {
      const uint64_t per = jobs_->stage(s).slot_chunks;
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
  } else {
    // Bounded wait ran out: cancelled, and the unpacks that were writing the cache are done.
    metrics_->restore_timeouts.fetch_add(1, std::memory_order_relaxed);
    out.status = Timeout(fmt::format("restore {} did not finish within {} ms; computing instead", r.id,
                                     options_.timeout.count()));
    out.end_token = r.hit.gpu_cached_tokens;
  }
  out.restored_tokens = out.end_token - r.hit.gpu_cached_tokens;
  metrics_->restores_finished.fetch_add(1, std::memory_order_relaxed);
  metrics_->restore_seconds.Observe(std::chrono::duration<double>(Clock::now() - r.submitted).count());
  metrics_->restore_tokens.fetch_add(out.restored_tokens, std::memory_order_relaxed);
  if (out.fell_back()) {
    metrics_->restore_fallbacks.fetch_add(1, std::memory_order_relaxed);
    metrics_->restore_fallback_tokens.fetch_add(out.planned_tokens - out.restored_tokens, std::memory_order_relaxed);
  }
}

std::optional<RestoreOutcome> RestoreEngine::Poll(uint64_t request_id) { return jobs_->PollOutcome<Request>(request_id); }

RestoreOutcome RestoreEngine::Wait(uint64_t request_id, Clock::time_point deadline) {
  return jobs_->WaitOutcome<Request>(request_id, deadline);
}

}  // namespace kvpool::connector
