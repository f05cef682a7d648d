// DeploymentContext: what every instance of one emulated deployment shares. Plain pointers;
// the Deployment owns them all and outlives its instances.
#pragma once

#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"
#include "engine/cost_model.h"
#include "engine/device_placement.h"
#include "engine/model_geometry.h"
#include "engine/simulation.h"

namespace kvpool::engine {

struct DeploymentContext {
  Simulation* sim = nullptr;
  const ModelGeometry* geometry = nullptr;
  const CostModel* cost = nullptr;
  const connector::KvNamespace* ns = nullptr;  // spec with the run's salted model id
  connector::ChunkStore* pool = nullptr;       // null: no pool (GPU prefix cache only)
  DevicePlacement devices;                     // where the caches live (host memory by default)
};

}  // namespace kvpool::engine
