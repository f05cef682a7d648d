// CacheModel: the capacity planner's stand-in for the emulated deployment (`kvpool plan`). It
// tracks which chunks the deployment's caches would hold — each prefill instance's GPU prefix
// cache and one shared pool, LRU over 256-token chunks (chunk_lru.h) — without a byte of KV,
// and serves a request in the time the cost model gives it alone: its restore, the prefill of
// what it computes, the handoff, and decode at the batch its decode instance has in flight.
// Nothing queues, so what it predicts is the reuse the caches allow while the deployment
// keeps up; a deployment that falls behind reorders its sessions and reuses less.
//
// Per request, as the deployment does (prefill_instance.cc): the GPU cache's leading run of
// the cacheable prefix (all but the last token), then the pool's run from there (read: most
// recent); the prompt's chunks enter the GPU cache, and those it computed are saved to the
// pool. The router is the deployment's (session_router.h) over requests in flight. Retention
// hints are ignored: the model plans for `--retention lru`.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "connector/kv_namespace.h"
#include "engine/cost_model.h"
#include "engine/request_sink.h"
#include "engine/session_router.h"
#include "engine/simulation.h"
#include "engine/topology.h"
#include "replay/chunk_lru.h"

namespace kvpool::replay {

struct CacheModelOptions {
  engine::ModelGeometry geometry;  // its pool_tokens: the pool's capacity
  engine::Topology topology = engine::Topology::Uniform(1);
  engine::CostModelParams cost = engine::CostModelParams::Published();
  // The pool's eviction (master::PoolOptions' defaults): above `high_watermark` of its capacity
  // it evicts `evict_fraction` of it.
  double high_watermark = 0.90;
  double evict_fraction = 0.05;
  uint64_t seed = 1;
};

class CacheModel final : public engine::RequestSink {
 public:
  // REQUIRES: sim outlives the model; a valid geometry (KvNamespace::Create accepts its spec).
  static Result<std::unique_ptr<CacheModel>> Create(CacheModelOptions options, engine::Simulation* sim);

  void Submit(engine::DeploymentRequest request, std::function<void(const engine::RequestRecord&)> on_done) override;
  const engine::ModelGeometry& geometry() const override { return options_.geometry; }
  bool uses_pool() const override { return options_.geometry.pool_tokens > 0; }
  void RetainSession(std::span<const connector::TokenId>, std::chrono::milliseconds,
                     std::chrono::milliseconds) override {}
  void ReleaseSession(std::span<const connector::TokenId>) override {}
  void SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) override;

  uint64_t pool_evicted_chunks() const { return pool_.evicted(); }
  // The share of [from, to) the prefill instances would spend computing the requests that
  // arrived in it, at their pipelines' throughput (the busiest stage's time per micro-batch):
  // above 1, prefill falls behind, and far above it the prediction is optimistic
  // (docs/benchmarks.md, "Capacity planner").
  double PrefillLoad(double from, double to) const;

 private:
  CacheModel(CacheModelOptions options, connector::KvNamespace ns, engine::Simulation* sim);
  // A lone request's prefill of tokens [from, to): its latency; `busiest_s` gets the pipeline
  // time it takes from others (the busiest stage's, summed over its micro-batches).
  double PrefillSeconds(uint64_t from, uint64_t to, double* busiest_s) const;

  const CacheModelOptions options_;
  const connector::KvNamespace ns_;
  const engine::CostModel cost_;
  engine::Simulation* const sim_;
  engine::SessionRouter router_;
  std::vector<int> prefill_candidates_;  // every prefill instance: one group, as Uniform's
  std::vector<double> prefill_in_flight_;
  std::vector<ChunkLru> gpu_caches_;  // one per prefill instance
  ChunkLru pool_;
  // Decode: requests and their context tokens in flight on each instance (its batch).
  std::vector<uint64_t> decode_batch_, decode_context_;
  std::vector<std::pair<double, double>> prefill_busy_;  // (arrival, busiest-stage seconds) per request
  uint64_t next_request_id_ = 1;
};

}  // namespace kvpool::replay
