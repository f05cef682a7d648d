// DeploymentContext: what every instance of one emulated deployment shares. Plain pointers;
// the Deployment owns them all and outlives its instances.
#pragma once

#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"
#include "engine/cost_model.h"
#include "engine/device_placement.h"
#include "engine/model_geometry.h"
#include "engine/rail_network.h"
#include "engine/simulation.h"
#include "engine/topology.h"

namespace kvpool::engine {

struct DeploymentContext {
  Simulation* sim = nullptr;
  const ModelGeometry* geometry = nullptr;
  const CostModel* cost = nullptr;
  const connector::KvNamespace* ns = nullptr;  // spec with the run's salted model id
  const Topology* topology = nullptr;
  RailNetwork* rails = nullptr;  // cross-server transfers (emulated time)
  // true: one pool whose memory every server contributes, so a prefill instance's pool
  // traffic mostly crosses the rails; false: no pool, or each prefill instance's pool is on
  // its own server.
  bool pool_spans_servers = false;
  DevicePlacement devices;  // where the caches live (host memory by default)
  bool verify_checksums = true;  // DeploymentOptions::verify_checksums
  double prefetch_share = 0;      // DeploymentOptions::prefetch_share
};

}  // namespace kvpool::engine
