#include "engine/prefill_instance.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "connector/prefix_lookup.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Staging per stage: room for a window of several chunks per worker, at least 1 MiB.
uint64_t StagingBytes(const connector::KvModelSpec& spec, uint32_t workers) {
  uint64_t largest = 0;
  for (uint32_t s = 0; s < spec.num_stages(); ++s) largest = std::max(largest, spec.stage_object_bytes(s));
  return std::max<uint64_t>(uint64_t{1} << 20, 4 * largest * workers);
}

// The final outcome of request `id` on a connector engine (restore or save). The request's
// blocks are lent to the engine until it answers, so this waits on: each Wait has a deadline,
// and a round that passes it says which request is still running. An engine answers in bounded
// time (a restore by its own bounded wait plus an unpack already running; a save's pool calls
// by the client's deadlines), so the rounds end.
template <typename Engine>
auto FinalOutcome(Engine& engine, uint64_t id, int instance, const char* what) {
  constexpr std::chrono::seconds kRound{30};
  for (;;) {
    auto out = engine.Wait(id, std::chrono::steady_clock::now() + kRound);
    if (out.status.code() != StatusCode::kNotReady) return out;
    spdlog::warn("prefill {}: {} {} still running after {} s more; its blocks stay lent to it", instance, what, id,
                 kRound.count());
  }
}

}  // namespace

PrefillInstance::PrefillInstance(int index, EngineSlot slot, connector::ChunkStore* pool,
                                 const DeploymentContext& ctx)
    : index_(index),
      slot_(slot),
      pool_(pool),
      ctx_(ctx),
      prefix_cache_(ctx.geometry->prefill_cache_tokens / ctx.geometry->spec.block_tokens),
      stage_free_at_(ctx.geometry->prefill_pipeline_depth(), 0.0),
      prefetch_budget_blocks_(static_cast<uint64_t>(ctx.prefetch_share *
                                                    static_cast<double>(prefix_cache_.num_blocks()))) {}

Result<std::unique_ptr<PrefillInstance>> PrefillInstance::Create(int index, EngineSlot slot,
                                                                 connector::ChunkStore* pool,
                                                                 const DeploymentContext& ctx) {
  std::unique_ptr<PrefillInstance> p(new PrefillInstance(index, slot, pool, ctx));
  const connector::KvModelSpec& spec = ctx.ns->spec();
  std::vector<connector::StageDevice> devices;
  for (uint32_t s = 0; s < spec.num_stages(); ++s) {
    auto memory = NewKvCacheMemory(connector::PagedKvLayout::ForStage(spec, s), p->prefix_cache_.num_blocks(),
                                   ctx.devices.PrefillStage(index, s, spec.num_stages()));
    if (!memory.ok()) return memory.status();
    p->stages_.push_back(std::move(memory).value());
    devices.push_back(connector::StageDevice{p->stages_.back()->cache(), p->stages_.back()->cuda_device()});
  }
  if (pool != nullptr) {
    connector::RestoreOptions ro;
    ro.staging_bytes_per_stage = StagingBytes(spec, ro.workers_per_stage);
    ro.verify_checksums = ctx.verify_checksums;
    auto restore = connector::RestoreEngine::Create(pool, *ctx.ns, devices, ro, &p->metrics_);
    if (!restore.ok()) return restore.status();
    p->restore_ = std::move(restore).value();
    connector::SaveOptions so;
    so.staging_bytes_per_stage = StagingBytes(spec, 1);
    so.stages_in_order = true;  // the replay's results must not depend on its threads' timing
    auto save = connector::SaveEngine::Create(pool, *ctx.ns, devices, so, &p->metrics_);
    if (!save.ok()) return save.status();
    p->save_ = std::move(save).value();
  }
  return p;
}

void PrefillInstance::WaitIdle() {
  if (restore_) restore_->WaitIdle();
}

std::vector<const connector::PagedKvCache*> PrefillInstance::stage_caches() const {
  std::vector<const connector::PagedKvCache*> out;
  for (const auto& s : stages_) out.push_back(&s->cache());
  return out;
}

std::vector<int> PrefillInstance::stage_devices() const {
  std::vector<int> out;
  for (const auto& s : stages_) out.push_back(s->cuda_device());
  return out;
}

std::vector<std::vector<connector::BlockId>> PrefillInstance::StageTables(const InFlightRequest& r) const {
  return std::vector<std::vector<connector::BlockId>>(stages_.size(), r.prefill_blocks);
}

void PrefillInstance::Enqueue(InFlightRequest* r) {
  r->record.prefill_instance = index_;
  pending_tokens_ += r->tokens.size();
  queued_.push_back(r);
  StartQueued();
}

void PrefillInstance::StartQueued() {
  // Enough started work to keep the forward pass busy while the next restores run.
  // One long request alone would leave the other stages idle, so the pipeline's depth in
  // requests always starts when blocks allow.
  const uint64_t ahead = 4 * uint64_t{ctx_.geometry->max_batched_tokens};
  while (!queued_.empty() && (started_tokens_ < ahead || started_requests_ < stage_free_at_.size())) {
    InFlightRequest* head = queued_.front();
    bool started = TryStart(head);
    // Prefetches never keep a request from starting: the latest ones give their blocks back
    // (and restore when they start) until it fits.
    while (!started && (prefetched_.size() > 1 || (prefetched_.size() == 1 && prefetched_[0] != head))) {
      ReleasePrefetch(prefetched_.back() != head ? prefetched_.back() : prefetched_.front(), /*restarts=*/true);
      started = TryStart(head);
    }
    if (!started) break;
    queued_.pop_front();
  }
  PumpPrefetches();
}

void PrefillInstance::Prefetch(InFlightRequest* r) {
  if (pool_ == nullptr || prefetch_budget_blocks_ == 0) return;
  prefetch_waiting_.push_back(r);
  PumpPrefetches();
}

void PrefillInstance::PumpPrefetches() {
  while (!prefetch_waiting_.empty() && TryPrefetch(prefetch_waiting_.front())) prefetch_waiting_.pop_front();
}

bool PrefillInstance::TryPrefetch(InFlightRequest* r) {
  const auto start = std::chrono::steady_clock::now();
  const uint32_t block = ctx_.geometry->spec.block_tokens;
  const uint64_t prompt_cap = CacheablePrefix(r->tokens.size(), block);
  std::vector<connector::BlockId> prefix = prefix_cache_.AcquirePrefix(r->block_keys, prompt_cap / block);
  const uint64_t gpu_tokens = prefix.size() * block;
  auto hit = LookUp(*r, prompt_cap, gpu_tokens);
  // Its blocks: the GPU-cached prefix and the pool's run (whole chunks, so whole blocks).
  const uint64_t blocks = hit.ok() ? hit->end_token() / block : 0;
  const bool worth_it = hit.ok() && hit->restorable_tokens() > 0 && blocks <= prefetch_budget_blocks_;
  if (!worth_it || prefetch_held_blocks_ + blocks > prefetch_budget_blocks_) {
    prefix_cache_.Release(prefix);
    return !worth_it;
  }
  auto rest = prefix_cache_.AllocateBlocks(blocks - prefix.size());
  if (!rest.ok()) {
    prefix_cache_.Release(prefix);
    return false;
  }
  r->prefill_blocks = std::move(prefix);
  r->prefill_blocks.insert(r->prefill_blocks.end(), rest->begin(), rest->end());
  r->record.gpu_cached_tokens = gpu_tokens;
  r->compute_from = gpu_tokens;
  r->restore_done_s = ctx_.sim->now() + Restore(r, *hit, gpu_tokens);
  r->record.restore_real_s = SecondsSince(start);
  r->prefetched = r->record.prefetched = true;
  prefetched_.push_back(r);
  prefetch_held_blocks_ += blocks;
  ++prefetches_;
  return true;
}

void PrefillInstance::ForgetPrefetch(InFlightRequest* r) {
  if (auto it = std::find(prefetched_.begin(), prefetched_.end(), r); it != prefetched_.end()) {
    prefetched_.erase(it);
    prefetch_held_blocks_ -= r->prefill_blocks.size();
    r->prefetched = false;
  } else if (auto w = std::find(prefetch_waiting_.begin(), prefetch_waiting_.end(), r); w != prefetch_waiting_.end()) {
    prefetch_waiting_.erase(w);
  }
}

void PrefillInstance::ReleasePrefetch(InFlightRequest* r, bool restarts) {
  ForgetPrefetch(r);
  prefix_cache_.Release(r->prefill_blocks);
  r->prefill_blocks.clear();
  r->record.prefetched = false;
  ++prefetches_dropped_;
  if (!restarts) return;
  // What the prefetch found and restored is gone with its blocks: its start begins afresh.
  RequestRecord& rec = r->record;
  rec.gpu_cached_tokens = rec.pool_tokens = rec.pool_ssd_tokens = rec.restore_fallback_tokens = 0;
  rec.restore_bytes = 0;
  rec.restore_real_s = 0;
  rec.stage_restore_s.clear();
  r->compute_from = 0;
}

void PrefillInstance::DropPrefetch(InFlightRequest* r) {
  if (r->prefetched) {
    ReleasePrefetch(r, /*restarts=*/false);
  } else {
    ForgetPrefetch(r);
  }
  StartQueued();
}

bool PrefillInstance::TryStart(InFlightRequest* r) {
  const uint32_t block = ctx_.geometry->spec.block_tokens;
  const uint64_t n = r->tokens.size();
  const uint64_t total_blocks = (n + block - 1) / block;
  double ready_delay = 0;
  if (r->prefetched) {
    // Its prefix is held and restored (or restoring): blocks for the rest, then compute once
    // the restore is done.
    auto rest = prefix_cache_.AllocateBlocks(total_blocks - r->prefill_blocks.size());
    if (!rest.ok()) return false;
    ForgetPrefetch(r);
    r->prefill_blocks.insert(r->prefill_blocks.end(), rest->begin(), rest->end());
    ready_delay = std::max(0.0, r->restore_done_s - ctx_.sim->now());
  } else {
    const uint64_t prompt_cap = CacheablePrefix(n, block);
    std::vector<connector::BlockId> prefix = prefix_cache_.AcquirePrefix(r->block_keys, prompt_cap / block);
    auto rest = prefix_cache_.AllocateBlocks(total_blocks - prefix.size());
    if (!rest.ok()) {
      prefix_cache_.Release(prefix);
      if (total_blocks > prefix_cache_.num_blocks()) {
        spdlog::error("prefill {}: a {}-token request can never fit a {}-block cache", index_, n,
                      prefix_cache_.num_blocks());
      }
      return false;
    }
    ForgetPrefetch(r);  // it starts before its prefetch could run: it restores now instead
    const uint64_t gpu_tokens = prefix.size() * block;
    r->prefill_blocks = std::move(prefix);
    r->prefill_blocks.insert(r->prefill_blocks.end(), rest->begin(), rest->end());
    r->record.gpu_cached_tokens = gpu_tokens;
    r->compute_from = gpu_tokens;
    if (pool_ != nullptr) {
      const auto start = std::chrono::steady_clock::now();
      if (auto hit = LookUp(*r, prompt_cap, gpu_tokens); hit.ok() && hit->restorable_tokens() > 0)
        ready_delay = Restore(r, *hit, gpu_tokens);
      r->record.restore_real_s = SecondsSince(start);
    }
  }
  r->record.restore_wait_s = ready_delay;
  r->computed_until = r->compute_from;
  r->record.computed_tokens = n - r->compute_from;
  pending_tokens_ -= r->compute_from;  // only what is left to compute stays as load
  started_tokens_ += n - r->compute_from;
  ++started_requests_;
  ctx_.sim->After(ready_delay, [this, r] {
    r->record.prefill_ready_s = ctx_.sim->now();
    ready_.push_back(r);
    Kick();
  });
  return true;
}

Result<connector::PrefixHit> PrefillInstance::LookUp(const InFlightRequest& r, uint64_t prompt_cap,
                                                     uint64_t gpu_tokens) {
  const std::span<const connector::TokenId> prompt(r.tokens.data(), prompt_cap);
  auto hit = connector::FindCachedPrefix(*pool_, *ctx_.ns, prompt, gpu_tokens, &metrics_);
  if (!hit.ok()) {
    ++restore_errors_;
    spdlog::warn("prefill {}: pool lookup failed, computing instead: {}", index_, hit.status().ToString());
  }
  return hit;
}

double PrefillInstance::Restore(InFlightRequest* r, const connector::PrefixHit& hit, uint64_t gpu_tokens) {
  const uint64_t bytes_before = metrics_.restore_bytes.load();
  if (Status s = restore_->Start(r->record.request_id, hit, StageTables(*r)); !s.ok()) {
    ++restore_errors_;
    r->record.restore_fallback_tokens = hit.restorable_tokens();
    spdlog::warn("prefill {}: restore refused, computing instead: {}", index_, s.ToString());
    return 0;
  }
  const connector::RestoreOutcome out = FinalOutcome(*restore_, r->record.request_id, index_, "restore");
  r->record.restore_fallback_tokens = out.planned_tokens - out.restored_tokens;
  r->record.restore_bytes = metrics_.restore_bytes.load() - bytes_before;
  if (!out.status.ok()) ++restore_errors_;
  if (out.restored_tokens == 0) return 0;
  const uint64_t end = gpu_tokens + out.restored_tokens;
  const connector::KvModelSpec& spec = ctx_.ns->spec();
  // Restores take whole chunks from the hit's first on; those some stage read from SSD.
  const uint64_t chunks = out.restored_tokens / hit.chunk_tokens;
  std::vector<uint64_t> ssd_chunks(spec.num_stages(), 0);
  uint64_t any_ssd_chunks = 0;
  for (uint64_t c = 0; c < chunks; ++c) {
    bool any = false;
    for (uint32_t s = 0; s < spec.num_stages(); ++s) {
      const bool on_ssd = hit.lookup->on_ssd(hit.lookup_index(c, s));
      ssd_chunks[s] += on_ssd ? 1 : 0;
      any = any || on_ssd;
    }
    any_ssd_chunks += any ? 1 : 0;
  }
  r->record.pool_ssd_tokens = any_ssd_chunks * hit.chunk_tokens;
  for (uint32_t s = 0; s < spec.num_stages(); ++s) {
    r->record.verification_errors +=
        CountKvMismatchesOrOne(*stages_[s], r->prefill_blocks, spec.first_layer(s), r->block_keys, gpu_tokens, end);
    // The stage reads at its own pace, and no sooner than the rails deliver its bytes.
    const double rail_s = PoolRailEnd(s, out.restored_tokens, /*to_pool=*/false) - ctx_.sim->now();
    const uint64_t ssd_tokens = ssd_chunks[s] * hit.chunk_tokens;
    r->record.stage_restore_s.push_back(std::max(ctx_.cost->StageRestoreSeconds(s, out.restored_tokens, ssd_tokens),
                                                 rail_s > 0 ? ctx_.cost->params().restore_fixed_s + rail_s : 0));
  }
  r->record.pool_tokens = out.restored_tokens;
  r->compute_from = end;
  return *std::max_element(r->record.stage_restore_s.begin(), r->record.stage_restore_s.end());
}

void PrefillInstance::Kick() {
  if (first_stage_busy_ || micro_batches_in_flight_ == stage_free_at_.size()) return;
  std::vector<InFlightRequest*> batch;
  std::vector<PrefillSlice> spans;
  uint64_t budget = ctx_.geometry->max_batched_tokens;
  for (InFlightRequest* r : ready_) {
    if (budget == 0) break;
    if (r->in_micro_batch) continue;
    const uint64_t take = std::min<uint64_t>(budget, r->tokens.size() - r->computed_until);
    batch.push_back(r);
    spans.push_back({r->computed_until, r->computed_until + take});
    budget -= take;
  }
  if (batch.empty()) return;
  // The forward pass: every stage writes the KV of the tokens it computes.
  const connector::KvModelSpec& spec = ctx_.ns->spec();
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->in_micro_batch = true;
    for (uint32_t st = 0; st < spec.num_stages(); ++st) {
      const Status written = stages_[st]->WriteKv(batch[i]->prefill_blocks, spec.first_layer(st),
                                                  batch[i]->block_keys, spans[i].start, spans[i].end);
      if (!written.ok()) {  // the cache does not hold the KV it should: a verification error
        spdlog::error("prefill {}: {}", index_, written.ToString());
        ++batch[i]->record.verification_errors;
      }
    }
  }
  // Stages take micro-batches in the order they entered, so the whole path is known now.
  const double now = ctx_.sim->now();
  double end = now;
  for (uint32_t st = 0; st < stage_free_at_.size(); ++st) {
    end = std::max(end, stage_free_at_[st]) + ctx_.cost->PrefillStageSeconds(st, spans);
    stage_free_at_[st] = end;
  }
  first_stage_busy_ = true;
  ++micro_batches_in_flight_;
  ctx_.sim->After(stage_free_at_[0] - now, [this] {
    first_stage_busy_ = false;
    Kick();
  });
  ctx_.sim->After(end - now, [this, batch = std::move(batch), spans = std::move(spans)] {
    FinishMicroBatch(batch, spans);
  });
}

void PrefillInstance::FinishMicroBatch(const std::vector<InFlightRequest*>& batch,
                                       const std::vector<PrefillSlice>& spans) {
  --micro_batches_in_flight_;
  std::vector<InFlightRequest*> finished;
  for (size_t i = 0; i < batch.size(); ++i) {
    InFlightRequest* r = batch[i];
    r->in_micro_batch = false;
    r->computed_until = spans[i].end;
    pending_tokens_ -= spans[i].end - spans[i].start;
    started_tokens_ -= spans[i].end - spans[i].start;
    if (r->computed_until == r->tokens.size()) finished.push_back(r);
  }
  for (InFlightRequest* r : finished) {
    ready_.erase(std::find(ready_.begin(), ready_.end(), r));
    --started_requests_;
    SaveToPool(r);
    on_prefill_done(r);
  }
  StartQueued();
  Kick();
}

void PrefillInstance::SaveToPool(InFlightRequest* r) {
  if (pool_ == nullptr) return;
  const uint32_t chunk = ctx_.ns->spec().chunk_tokens;
  if (r->tokens.size() / chunk <= r->compute_from / chunk) return;  // no new full chunk
  const uint64_t bytes_before = metrics_.save_bytes.load();
  // Chunks below compute_from came from the GPU cache or the pool: saved before (SaveEngine
  // skips any that are still there anyway).
  if (Status s = save_->Submit(r->record.request_id, r->tokens, StageTables(*r), r->compute_from / chunk); !s.ok()) {
    ++save_failures_;
    return;
  }
  const connector::SaveOutcome out = FinalOutcome(*save_, r->record.request_id, index_, "save");
  if (!out.status.ok()) ++save_failures_;
  r->record.save_bytes = metrics_.save_bytes.load() - bytes_before;
  // Saves do not hold the request up, but their bytes take rail time from what follows.
  const uint64_t saved_tokens = (r->tokens.size() / chunk - r->compute_from / chunk) * chunk;
  for (uint32_t s = 0; s < ctx_.ns->spec().num_stages(); ++s) PoolRailEnd(s, saved_tokens, /*to_pool=*/true);
}

double PrefillInstance::PoolRailEnd(uint32_t stage, uint64_t tokens, bool to_pool) {
  const double now = ctx_.sim->now();
  if (!ctx_.pool_spans_servers || tokens == 0) return now;
  // The pool's part for this stage has stores behind the NICs of its rail on every server
  // (the published cluster: a storage service per NIC); objects spread evenly over them,
  // the ones on this server reached without a rail.
  const Topology& t = *ctx_.topology;
  const int nic = slot_.first_gpu + static_cast<int>(stage);
  const int rail = nic % t.rails;
  const int nics_on_rail = (t.gpus_per_server - rail + t.rails - 1) / t.rails;
  const double share = static_cast<double>(tokens) * ctx_.geometry->reference_stage_bytes_per_token(stage) /
                       (static_cast<double>(t.servers) * nics_on_rail);
  double end = now;
  for (int server = 0; server < t.servers; ++server) {
    if (server == slot_.server) continue;
    for (int store_nic = rail; store_nic < t.gpus_per_server; store_nic += t.rails) {
      end = std::max(end, to_pool ? ctx_.rails->Transfer(slot_.server, nic, server, store_nic, share, now)
                                  : ctx_.rails->Transfer(server, store_nic, slot_.server, nic, share, now));
    }
  }
  return end;
}

void PrefillInstance::Release(InFlightRequest* r) {
  const uint32_t block = ctx_.geometry->spec.block_tokens;
  prefix_cache_.Publish(r->block_keys, r->prefill_blocks, r->tokens.size() / block);
  prefix_cache_.Release(r->prefill_blocks);
  r->prefill_blocks.clear();
  StartQueued();
}

}  // namespace kvpool::engine
