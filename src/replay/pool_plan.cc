#include "replay/pool_plan.h"

#include "replay/cache_model.h"

namespace kvpool::replay {

Result<std::vector<PlanPoint>> PlanPool(const trace::Corpus& corpus, const PlanOptions& options,
                                        const std::vector<uint64_t>& pool_tokens) {
  std::vector<PlanPoint> points;
  for (const uint64_t tokens : pool_tokens) {
    engine::Simulation sim;
    CacheModelOptions m;
    m.geometry = options.geometry;
    m.geometry.pool_tokens = tokens;
    m.topology = options.topology;
    m.cost = options.cost;
    m.seed = options.replay.seed;
    auto model = CacheModel::Create(std::move(m), &sim);
    if (!model.ok()) return model.status();
    ReplayOptions replay = options.replay;
    replay.retention = ReplayOptions::Retention::kLru;
    ReplayDriver driver(corpus, replay, model->get(), &sim);
    KVPOOL_RETURN_IF_ERROR(driver.Start());
    sim.Run();
    PlanPoint p;
    p.pool_tokens = tokens;
    p.summary = Summarize(driver.records(), driver.window_start_s(), driver.window_end_s(),
                          options.topology.total_gpus(options.geometry));
    p.summary.mode = tokens > 0 ? "pool" : "no-pool";
    p.summary.sessions = options.replay.sessions;
    p.pool_evicted_chunks = (*model)->pool_evicted_chunks();
    p.prefill_load = (*model)->PrefillLoad(driver.window_start_s(), driver.window_end_s());
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace kvpool::replay
