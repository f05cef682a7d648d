// PlanPool: the capacity planner (`kvpool plan`, issue 18). For each pool size it runs the
// replay's own lane semantics (ReplayDriver: lanes, warm-up, subagents, the measurement
// window) against CacheModel instead of the deployment, in emulated time with no KV bytes,
// and summarizes the window as a replay does — so its reuse is the replay's figure, predicted
// for a deployment that keeps up (cache_model.h), in a second or two per size.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/cost_model.h"
#include "engine/model_geometry.h"
#include "engine/topology.h"
#include "replay/replay_driver.h"
#include "replay/replay_metrics.h"
#include "trace/trace.h"

namespace kvpool::replay {

struct PlanOptions {
  engine::ModelGeometry geometry;  // its pool_tokens is replaced by each planned size
  engine::Topology topology = engine::Topology::Uniform(1);
  engine::CostModelParams cost = engine::CostModelParams::Published();
  ReplayOptions replay;  // retention is ignored: the plan is for LRU (with supersession if set)
};

struct PlanPoint {
  uint64_t pool_tokens = 0;
  ReplaySummary summary;  // the window's token sources, as a replay's (timings: no queueing)
  uint64_t pool_evicted_chunks = 0;
  double prefill_load = 0;  // CacheModel::PrefillLoad over the window
};

// One point per size, in the order given. INVALID_ARGUMENT as the replay would refuse.
Result<std::vector<PlanPoint>> PlanPool(const trace::Corpus& corpus, const PlanOptions& options,
                                        const std::vector<uint64_t>& pool_tokens);

}  // namespace kvpool::replay
