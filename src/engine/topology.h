// Topology: the servers of an emulated deployment and where its engines run — which server
// holds each prefill and decode instance, and which group each belongs to.
//
// A group is a set of decode instances and the prefill instances that feed them (one router
// per group). A request goes to the decode instance with the most uncommitted KV room (the
// admission gate is decode-aware), then to a prefill instance of that decode instance's group.
// Servers matter for two things: which pool a prefill instance uses when every server has
// its own (PoolScope::kPerServer), and which transfers cross the rails between servers
// (rail_network.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/model_geometry.h"

namespace kvpool::engine {

struct EngineSlot {
  int server = 0;
  int group = 0;
  int first_gpu = 0;  // the engine's GPUs are first_gpu.. on its server; GPU g uses NIC g
};

struct Topology {
  std::string name;
  int servers = 1;
  int gpus_per_server = 8;
  // GPU i of every engine is on rail i (NIC g of a server on rail g mod rails, as in the
  // published cluster); a pool split by rail has one part per rail.
  int rails = 4;
  std::vector<EngineSlot> prefill;  // prefill instance i runs on prefill[i].server
  std::vector<EngineSlot> decode;
  // The pool memory each server contributes, as a share of the geometry's pool_tokens (the
  // single server's pool). 1 / servers for Uniform: one pool of pool_tokens in all.
  double pool_share_per_server = 1;
  // The routers' policy (session_router.h): true, a session sticks to its first prefill
  // instance; false, power of two choices for every request.
  bool router_session_affinity = true;

  // `servers` servers, each one prefill + one decode instance, all in one group (every
  // prefill instance may feed every decode instance). Uniform(1) is the published server.
  static Topology Uniform(int servers);
  // The published four-server cluster: 4 x 8 GPUs, 6P2D in two groups of 3 prefill + 1
  // decode; no prefill on its own group's decode server; every engine on 4 GPUs of one
  // server; the routers place every request by power of two choices. Each server
  // contributes 768 GiB of pool (8 x 96 GiB) against the single server's 1.42 TiB.
  static Topology FourServer6P2D();

  int groups() const;
  uint64_t pool_tokens_per_server(const ModelGeometry& g) const;
  int total_gpus(const ModelGeometry& g) const;
  // Every instance on GPUs of a server that exist and no other engine uses, and every group
  // with both kinds of instance.
  Status Validate(const ModelGeometry& g) const;
};

// "1x8" (Uniform(1)), "4x8-6p2d"; "Nx8" for Uniform(N).
Result<Topology> TopologyPreset(std::string_view name);

}  // namespace kvpool::engine
