#include "replay/cache_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/gpu_prefix_cache.h"

namespace kvpool::replay {

Result<std::unique_ptr<CacheModel>> CacheModel::Create(CacheModelOptions options, engine::Simulation* sim) {
  if (options.topology.groups() != 1) {
    return InvalidArgument(fmt::format("the planner models one router group; topology {} has {}",
                                       options.topology.name, options.topology.groups()));
  }
  if (!(options.high_watermark > options.evict_fraction && options.high_watermark <= 1)) {
    return InvalidArgument("the pool's watermark must lie in (evict fraction, 1]");
  }
  auto ns = connector::KvNamespace::Create(options.geometry.spec);
  if (!ns.ok()) return ns.status();
  return std::unique_ptr<CacheModel>(new CacheModel(std::move(options), std::move(ns).value(), sim));
}

namespace {
uint64_t Chunks(uint64_t tokens, const connector::KvNamespace& ns) { return tokens / ns.spec().chunk_tokens; }
}  // namespace

CacheModel::CacheModel(CacheModelOptions options, connector::KvNamespace ns, engine::Simulation* sim)
    : options_(std::move(options)),
      ns_(std::move(ns)),
      cost_(options_.cost, options_.geometry),
      sim_(sim),
      router_(options_.seed, options_.topology.router_session_affinity),
      prefill_in_flight_(options_.topology.prefill.size(), 0),
      pool_(static_cast<uint64_t>(options_.high_watermark * Chunks(options_.geometry.pool_tokens, ns_)),
            static_cast<uint64_t>((options_.high_watermark - options_.evict_fraction) *
                                  Chunks(options_.geometry.pool_tokens, ns_)),
            ChunkLru::Order::kHeadLeastRecent),
      decode_batch_(options_.topology.decode.size(), 0),
      decode_context_(options_.topology.decode.size(), 0) {
  const uint64_t gpu_chunks = Chunks(options_.geometry.prefill_cache_tokens, ns_);
  for (size_t i = 0; i < options_.topology.prefill.size(); ++i) {
    prefill_candidates_.push_back(static_cast<int>(i));
    gpu_caches_.emplace_back(gpu_chunks, gpu_chunks, ChunkLru::Order::kHeadMostRecent);
  }
}

void CacheModel::SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) {
  if (!uses_pool()) return;
  pool_.Release(connector::ChainChunkKeys(ns_, previous), first_changed / ns_.spec().chunk_tokens);
}

void CacheModel::Submit(engine::DeploymentRequest request, std::function<void(const engine::RequestRecord&)> on_done) {
  engine::RequestRecord r;
  r.request_id = next_request_id_++;
  r.session_id = request.session_id;
  r.counted = request.counted;
  r.arrival_s = sim_->now();
  r.input_tokens = request.tokens.size();
  r.output_tokens = request.output_tokens;

  const uint64_t chunk = ns_.spec().chunk_tokens;
  const std::vector<connector::ChunkKey> keys = connector::ChainChunkKeys(ns_, request.tokens);
  const std::span<const connector::ChunkKey> cacheable(keys.data(),
                                                       engine::CacheablePrefix(r.input_tokens, chunk) / chunk);
  const int prefill = router_.Route(r.session_id, prefill_candidates_, prefill_in_flight_);
  r.prefill_instance = prefill;
  ChunkLru& gpu = gpu_caches_[prefill];
  const size_t gpu_hit = gpu.LeadingRun(cacheable, 0);
  gpu.Touch(cacheable, 0, gpu_hit);
  const size_t pool_hit = uses_pool() ? pool_.LeadingRun(cacheable, gpu_hit) : 0;
  pool_.Touch(cacheable, gpu_hit, pool_hit);
  r.gpu_cached_tokens = gpu_hit * chunk;
  r.pool_tokens = pool_hit * chunk;
  r.computed_tokens = r.input_tokens - r.gpu_cached_tokens - r.pool_tokens;
  gpu.Insert(keys, 0);
  if (uses_pool()) pool_.Insert(keys, gpu_hit + pool_hit);

  // Its time alone: restore (stages in parallel), prefill, handoff, then decode at the batch
  // its decode instance has in flight.
  const uint32_t stages = ns_.spec().num_stages();
  double restore_s = 0;
  for (uint32_t s = 0; s < stages && pool_hit > 0; ++s) {
    restore_s = std::max(restore_s, cost_.StageRestoreSeconds(s, r.pool_tokens));
  }
  double busiest_s = 0;
  const double prefill_s = PrefillSeconds(r.input_tokens - r.computed_tokens, r.input_tokens, &busiest_s);
  prefill_busy_.emplace_back(r.arrival_s, busiest_s);
  const int decode = static_cast<int>(std::min_element(decode_context_.begin(), decode_context_.end()) -
                                      decode_context_.begin());
  r.decode_instance = decode;
  r.admitted_s = r.arrival_s;
  r.prefill_ready_s = r.arrival_s + restore_s;
  r.first_token_s = r.prefill_ready_s + prefill_s + cost_.HandoffSeconds(r.input_tokens);
  ++decode_batch_[decode];
  decode_context_[decode] += r.input_tokens;
  r.finish_s = r.first_token_s +
               r.output_tokens * cost_.DecodeStepSeconds(decode_batch_[decode], decode_context_[decode]);
  prefill_in_flight_[prefill] += 1;
  sim_->At(r.finish_s, [this, r = std::move(r), on_done = std::move(on_done)] {
    prefill_in_flight_[r.prefill_instance] -= 1;
    --decode_batch_[r.decode_instance];
    decode_context_[r.decode_instance] -= r.input_tokens;
    on_done(r);
  });
}

double CacheModel::PrefillSeconds(uint64_t from, uint64_t to, double* busiest_s) const {
  // Micro-batches of max_batched_tokens: the pipeline takes one per busiest-stage time, and the
  // last goes through every stage after it. REQUIRES: from < to.
  const uint64_t batch_tokens = std::max<uint64_t>(1, options_.geometry.max_batched_tokens);
  engine::PrefillSlice slice;
  *busiest_s = 0;
  for (uint64_t start = from; start < to; start += batch_tokens) {
    slice = {start, std::min(to, start + batch_tokens)};
    *busiest_s += cost_.PrefillIterationSeconds({&slice, 1});
  }
  double seconds = *busiest_s - cost_.PrefillIterationSeconds({&slice, 1});
  for (uint32_t s = 0; s < ns_.spec().num_stages(); ++s) seconds += cost_.PrefillStageSeconds(s, {&slice, 1});
  return seconds;
}

double CacheModel::PrefillLoad(double from, double to) const {
  double busy = 0;
  for (const auto& [arrival, seconds] : prefill_busy_) busy += arrival >= from && arrival < to ? seconds : 0;
  return to > from ? busy / ((to - from) * static_cast<double>(gpu_caches_.size())) : 0;
}

}  // namespace kvpool::replay
