#include "engine/deployment.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "connector/chunk_keys.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {

Deployment::Deployment(DeploymentOptions options, Simulation* sim) : options_(std::move(options)), sim_(sim) {}

Deployment::~Deployment() = default;

void Deployment::WaitIdle() {
  for (auto& p : prefill_) p->WaitIdle();
}

Result<std::unique_ptr<Deployment>> Deployment::Create(DeploymentOptions options, Simulation* sim) {
  KVPOOL_RETURN_IF_ERROR(options.geometry.Validate());
  const Topology& t = options.topology;
  KVPOOL_RETURN_IF_ERROR(t.Validate(options.geometry));
  if (options.pools.size() > 1 && options.pools.size() != static_cast<size_t>(t.servers)) {
    return InvalidArgument(fmt::format("{} pools for {} servers: give one shared pool or one per server",
                                       options.pools.size(), t.servers));
  }
  for (connector::ChunkStore* pool : options.pools) {
    if (pool == nullptr) return InvalidArgument("a null pool");
  }
  if (!(options.prefetch_share >= 0 && options.prefetch_share <= 0.9)) {
    return InvalidArgument(fmt::format("prefetch share {} is outside [0, 0.9]: prefetches must leave GPU cache "
                                       "blocks to the requests that run",
                                       options.prefetch_share));
  }
  if (options.devices.on_device() && t.servers > 1) {
    return InvalidArgument("caches in GPU memory are emulated for one server only");
  }
  std::unique_ptr<Deployment> d(new Deployment(std::move(options), sim));
  connector::KvModelSpec spec = d->options_.geometry.spec;
  if (!d->options_.run_salt.empty()) spec.model_id += "/" + d->options_.run_salt;
  auto ns = connector::KvNamespace::Create(spec);
  if (!ns.ok()) return ns.status();
  d->ns_.emplace(std::move(ns).value());
  d->cost_ = std::make_unique<CostModel>(d->options_.cost, d->options_.geometry);
  const Topology& topology = d->options_.topology;
  d->rails_ = std::make_unique<RailNetwork>(topology.servers, topology.gpus_per_server,
                                            d->options_.cost.rail_bytes_per_s_per_nic);
  d->ctx_ = DeploymentContext{sim,
                              &d->options_.geometry,
                              d->cost_.get(),
                              &*d->ns_,
                              &topology,
                              d->rails_.get(),
                              d->options_.pools.size() == 1 && topology.servers > 1,
                              d->options_.devices,
                              d->options_.verify_checksums,
                              d->options_.prefetch_share};
  d->group_prefill_.resize(topology.groups());
  d->group_decode_.resize(topology.groups());
  for (int g = 0; g < topology.groups(); ++g) {
    d->routers_.emplace_back(d->options_.seed + g, topology.router_session_affinity);
  }
  const bool on_device = d->options_.devices.on_device();
  if (on_device && d->options_.handoff != nullptr && std::string_view(d->options_.handoff->name()) == "cpu") {
    return InvalidArgument("the cpu handoff reads host memory; caches on GPUs need the gpu or network handoff");
  }
  if (d->options_.handoff == nullptr && on_device) {
    auto gpu = NewGpuKvHandoff();
    if (!gpu.ok()) return gpu.status();
    d->own_handoff_ = std::move(gpu).value();
  } else if (d->options_.handoff == nullptr) {
    d->own_handoff_ = NewCpuKvHandoff();
  }
  d->handoff_ = d->options_.handoff ? d->options_.handoff : d->own_handoff_.get();
  Deployment* self = d.get();
  const std::vector<connector::ChunkStore*>& pools = d->options_.pools;
  for (int i = 0; i < static_cast<int>(topology.prefill.size()); ++i) {
    const EngineSlot& slot = topology.prefill[i];
    connector::ChunkStore* pool = pools.empty() ? nullptr : pools.size() == 1 ? pools[0] : pools[slot.server];
    d->group_prefill_[slot.group].push_back(i);
    auto p = PrefillInstance::Create(i, slot, pool, d->ctx_);
    if (!p.ok()) return p.status();
    (*p)->on_prefill_done = [self](InFlightRequest* r) { self->HandOff(r); };
    d->prefill_.push_back(std::move(p).value());
  }
  for (int i = 0; i < static_cast<int>(topology.decode.size()); ++i) {
    d->group_decode_[topology.decode[i].group].push_back(i);
    auto decode = DecodeInstance::Create(i, d->ctx_);
    if (!decode.ok()) return decode.status();
    d->decode_.push_back(std::move(decode).value());
    d->decode_.back()->on_finished = [self](InFlightRequest* r) { self->Finish(r); };
  }
  return d;
}

void Deployment::Submit(DeploymentRequest request, std::function<void(const RequestRecord&)> on_done) {
  auto owned = std::make_unique<InFlightRequest>();
  InFlightRequest* r = owned.get();
  r->record.request_id = next_request_id_++;
  r->record.session_id = request.session_id;
  r->record.counted = request.counted;
  r->record.arrival_s = sim_->now();
  r->record.input_tokens = request.tokens.size();
  r->record.output_tokens = std::max<uint64_t>(1, request.output_tokens);
  r->tokens = std::move(request.tokens);
  r->block_keys = ChainBlockKeys(r->tokens, ns_->spec().block_tokens);
  r->on_done = std::move(on_done);
  in_flight_.emplace(r->record.request_id, std::move(owned));

  if (r->tokens.empty()) return Fail(r, "empty prompt");
  // The decode instance of the session's group with the most uncommitted KV room.
  const std::vector<int>& decodes = group_decode_[GroupOf(r->record.session_id)];
  int pick = decodes[0];
  for (int i : decodes) {
    if (Committed(i) < Committed(pick)) pick = i;
  }
  DecodeInstance* best = decode_[pick].get();
  r->record.decode_instance = pick;
  if (request.max_tokens != 0 && request.max_tokens < r->record.output_tokens) {
    return Fail(r, fmt::format("max_tokens {} is below the {} tokens the request generates", request.max_tokens,
                               r->record.output_tokens));
  }
  const uint64_t reserved_output =
      options_.oracle_gate || request.max_tokens == 0 ? r->record.output_tokens : request.max_tokens;
  r->gate_tokens = best->GateTokens(r->tokens.size() + reserved_output);
  if (r->gate_tokens > best->gate().capacity()) {
    return Fail(r, fmt::format("{} prompt + reserved output tokens exceed a decode instance's {} KV tokens", r->gate_tokens,
                               best->gate().capacity()));
  }
  if (options_.prefetch_share > 0) {
    r->routed_to = RoutePrefill(*r);
    prefill_[r->routed_to]->Prefetch(r);
  }
  if (best->gate().Admit(r->record.request_id, r->gate_tokens)) {
    best->NoteUtilisation();
    StartPrefill(r);
    return;
  }
  const uint64_t id = r->record.request_id;
  sim_->After(options_.admission_timeout_s, [this, id, best] {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    std::vector<uint64_t> admitted;
    if (best->gate().Cancel(id, &admitted)) {
      Fail(it->second.get(), fmt::format("waited {} s at the KV admission gate", options_.admission_timeout_s));
      AdmitWaiting(*best, admitted);
    }
  });
}

uint64_t Deployment::Committed(int decode) const {
  return decode_[decode]->gate().reserved() + decode_[decode]->gate().waiting_tokens();
}

int Deployment::GroupOf(uint64_t session_id) {
  if (auto it = session_group_.find(session_id); it != session_group_.end()) return it->second;
  auto room = [&](int group) {
    uint64_t committed = 0;
    for (int i : group_decode_[group]) committed += Committed(i);
    return committed;
  };
  int best = 0;
  for (int g = 1; g < static_cast<int>(group_decode_.size()); ++g) {
    if (room(g) < room(best)) best = g;
  }
  session_group_.emplace(session_id, best);
  return best;
}

void Deployment::StartPrefill(InFlightRequest* r) {
  r->gate_admitted = true;
  r->record.admitted_s = sim_->now();
  prefill_[r->routed_to >= 0 ? r->routed_to : RoutePrefill(*r)]->Enqueue(r);
}

int Deployment::RoutePrefill(const InFlightRequest& r) {
  std::vector<double> loads;
  for (auto& p : prefill_) loads.push_back(p->load());
  const int group = options_.topology.decode[r.record.decode_instance].group;
  return routers_[group].Route(r.record.session_id, group_prefill_[group], loads);
}

double Deployment::HandoffRailEnd(const InFlightRequest& r) {
  const EngineSlot& from = options_.topology.prefill[r.record.prefill_instance];
  const EngineSlot& to = options_.topology.decode[r.record.decode_instance];
  double end = sim_->now();
  if (from.server == to.server) return end;
  // Stage s's GPU sends its layers of every token to decode GPU s, the one on its rail (the
  // pieces for decode's other ranks go on from there inside the decode server).
  const ModelGeometry& g = options_.geometry;
  for (uint32_t s = 0; s < g.reference_stage_layers.size(); ++s) {
    const double bytes = static_cast<double>(r.tokens.size()) * g.reference_stage_bytes_per_token(s);
    end = std::max(end, rails_->Transfer(from.server, from.first_gpu + s, to.server,
                                         to.first_gpu + s % g.gpus_per_decode_instance, bytes, sim_->now()));
  }
  return end;
}

void Deployment::HandOff(InFlightRequest* r) {
  PrefillInstance& p = *prefill_[r->record.prefill_instance];
  DecodeInstance& d = *decode_[r->record.decode_instance];
  const auto start = std::chrono::steady_clock::now();
  auto blocks = d.AllocateBlocks(r->tokens.size());
  if (!blocks.ok()) {
    p.Release(r);
    return Fail(r, "decode cache full despite the admission gate: " + blocks.status().ToString());
  }
  r->decode_blocks = std::move(blocks).value();
  const connector::KvModelSpec& spec = ns_->spec();
  KvHandoffRequest h;
  h.request_id = r->record.request_id;
  h.tokens = r->tokens.size();
  h.stage_caches = p.stage_caches();
  if (options_.devices.on_device()) h.stage_devices = p.stage_devices();
  for (uint32_t s = 0; s < spec.num_stages(); ++s) {
    h.stage_first_layers.push_back(spec.first_layer(s));
    h.stage_block_tables.push_back(r->prefill_blocks);
  }
  for (uint32_t rank = 0; rank < d.dcp_ranks(); ++rank) {
    h.decode_caches.push_back(&d.rank_memory(rank).cache());
    h.decode_block_tables.push_back(r->decode_blocks[rank]);
    if (options_.devices.on_device()) h.decode_devices.push_back(d.rank_memory(rank).cuda_device());
  }
  h.decode_interleave = d.token_map().interleave;
  const auto transfer_start = std::chrono::steady_clock::now();
  Result<uint64_t> moved = handoff_->Transfer(h);
  p.Release(r);
  if (!moved.ok()) return Fail(r, "handoff: " + moved.status().ToString());
  handoff_metrics_.seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - transfer_start).count());
  handoff_metrics_.bytes.ObserveSteps(*moved);
  r->record.handoff_bytes = *moved;
  for (uint32_t rank = 0; rank < d.dcp_ranks(); ++rank) {
    r->record.verification_errors +=
        CountKvMismatchesOrOne(d.rank_memory(rank), r->decode_blocks[rank], 0, r->block_keys, 0,
                               d.token_map().CountBelow(rank, r->tokens.size()), d.rank_tokens(rank));
  }
  r->record.handoff_real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r->record.handoff_s = cost_->HandoffSeconds(r->tokens.size());
  const double rail_end = HandoffRailEnd(*r);
  r->record.handoff_s =
      std::max(r->record.handoff_s, options_.cost.handoff_fixed_s + (rail_end - sim_->now()));
  const uint64_t id = r->record.request_id;
  sim_->After(r->record.handoff_s, [this, id] {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    InFlightRequest* q = it->second.get();
    q->record.first_token_s = sim_->now();
    q->generated = 1;
    if (q->generated >= q->record.output_tokens) {  // the prefill's token was the only one
      q->record.finish_s = sim_->now();
      Finish(q);
      return;
    }
    decode_[q->record.decode_instance]->Add(q);
  });
}

void Deployment::Finish(InFlightRequest* r) {
  DecodeInstance& d = *decode_[r->record.decode_instance];
  if (!r->decode_blocks.empty()) {
    // Only when decode never ran (a one-token output): DecodeInstance frees its own otherwise.
    d.ReleaseBlocks(r->decode_blocks);
    r->decode_blocks.clear();
  }
  const std::vector<uint64_t> admitted = d.gate().Release(r->gate_tokens);
  auto owned = std::move(in_flight_.at(r->record.request_id));
  in_flight_.erase(r->record.request_id);
  if (owned->on_done) owned->on_done(owned->record);
  AdmitWaiting(d, admitted);
}

void Deployment::Fail(InFlightRequest* r, std::string why) {
  r->record.failed = true;
  r->record.failure = std::move(why);
  r->record.finish_s = sim_->now();
  std::vector<uint64_t> admitted;
  DecodeInstance* d = r->record.decode_instance >= 0 ? decode_[r->record.decode_instance].get() : nullptr;
  // Failed before prefill took it (at the gate): what its prefetch holds goes back.
  if (r->routed_to >= 0 && r->record.prefill_instance < 0) prefill_[r->routed_to]->DropPrefetch(r);
  if (d != nullptr && r->gate_admitted) {
    if (!r->decode_blocks.empty()) d->ReleaseBlocks(r->decode_blocks);
    admitted = d->gate().Release(r->gate_tokens);
  }
  auto owned = std::move(in_flight_.at(r->record.request_id));
  in_flight_.erase(r->record.request_id);
  if (owned->on_done) owned->on_done(owned->record);
  if (d != nullptr) AdmitWaiting(*d, admitted);
}

void Deployment::AdmitWaiting(DecodeInstance& d, const std::vector<uint64_t>& admitted) {
  d.NoteUtilisation();
  for (uint64_t id : admitted) {
    auto it = in_flight_.find(id);
    if (it != in_flight_.end()) StartPrefill(it->second.get());
  }
}

std::vector<const connector::ConnectorMetrics*> Deployment::connector_metrics() const {
  std::vector<const connector::ConnectorMetrics*> out;
  for (const auto& p : prefill_) out.push_back(&p->connector_metrics());
  return out;
}

std::vector<std::string> Deployment::SessionKeys(std::span<const connector::TokenId> tokens) const {
  return connector::StageObjectKeys(*ns_, connector::ChainChunkKeys(*ns_, tokens));
}

void Deployment::RetainSession(std::span<const connector::TokenId> tokens, std::chrono::milliseconds ttl,
                               std::chrono::milliseconds reuse_in) {
  const std::vector<std::string> keys = SessionKeys(tokens);
  if (keys.empty()) return;
  for (connector::ChunkStore* pool : options_.pools) {
    // Split pools: a key lives in one of them; the others answer NOT_FOUND, which is no refusal.
    for (const Status& s : pool->Retain(keys, ttl, reuse_in)) {
      retention_refused_ += s.code() == StatusCode::kNoSpace ? 1 : 0;
    }
  }
  retention_keys_ += keys.size();
}

void Deployment::ReleaseSession(std::span<const connector::TokenId> tokens) {
  const std::vector<std::string> keys = SessionKeys(tokens);
  if (keys.empty()) return;
  for (connector::ChunkStore* pool : options_.pools) (void)pool->Release(keys);
  retention_keys_ += keys.size();
}

void Deployment::SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) {
  const std::vector<connector::ChunkKey> chunks = connector::ChainChunkKeys(*ns_, previous);
  // The chunk holding the first changed token has another key in the new prompt, and so does
  // every chunk after it (keys are chained).
  const size_t first = first_changed / ns_->spec().chunk_tokens;
  if (first >= chunks.size()) return;  // only the unsaved tail changed
  const std::vector<std::string> keys =
      connector::StageObjectKeys(*ns_, std::span<const connector::ChunkKey>(chunks).subspan(first));
  for (connector::ChunkStore* pool : options_.pools) (void)pool->Release(keys);
  superseded_chunks_ += chunks.size() - first;
}

DeploymentCounters Deployment::counters(double from, double to) const {
  DeploymentCounters c;
  for (const auto& p : prefill_) {
    c.prefix_cache_evictions += p->prefix_cache().evictions();
    c.restore_errors += p->restore_errors();
    c.save_failures += p->save_failures();
    c.prefetches += p->prefetches();
    c.prefetches_dropped += p->prefetches_dropped();
    for (const auto& [name, value] : p->connector_metrics().Snapshot()) c.connector[name] += value;
  }
  c.rails = rails_->counters();
  for (const SessionRouter& router : routers_) c.router_moves += router.moves();
  c.retention_keys = retention_keys_;
  c.retention_refused = retention_refused_;
  c.superseded_chunks = superseded_chunks_;
  c.superseded_bytes = superseded_chunks_ * ns_->spec().chunk_tokens * options_.geometry.bytes_per_token();
  for (const auto& d : decode_) {
    c.peak_decode_kv_utilisation = std::max(c.peak_decode_kv_utilisation, d->peak_kv_utilisation());
    c.mean_decode_kv_utilisation += d->MeanKvUtilisation(from, to) / decode_.size();
  }
  return c;
}

}  // namespace kvpool::engine
