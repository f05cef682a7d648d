// DeploymentContext: what every instance of one emulated deployment shares. Plain pointers;
// the Deployment owns them all and outlives its instances.
#pragma once

#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"
#include "replay/cost_model.h"
#include "replay/device_placement.h"
#include "replay/model_geometry.h"
#include "replay/simulation.h"

namespace kvpool::replay {

struct DeploymentContext {
  Simulation* sim = nullptr;
  const ModelGeometry* geometry = nullptr;
  const CostModel* cost = nullptr;
  const connector::KvNamespace* ns = nullptr;  // spec with the run's salted model id
  connector::ChunkStore* pool = nullptr;       // null: no pool (GPU prefix cache only)
  DevicePlacement devices;                     // where the caches live (host memory by default)
};

}  // namespace kvpool::replay
