#include "engine/topology.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace kvpool::engine {

Topology Topology::Uniform(int servers) {
  Topology t;
  t.name = fmt::format("{}x8", servers);
  t.servers = servers;
  for (int s = 0; s < servers; ++s) {
    t.prefill.push_back({s, 0, 0});
    t.decode.push_back({s, 0, 4});
  }
  t.pool_share_per_server = 1.0 / servers;
  return t;
}

Topology Topology::FourServer6P2D() {
  Topology t;
  t.name = "4x8-6p2d";
  t.servers = 4;
  // Group 0 decodes on server 0, group 1 on server 1; each group's three prefill instances
  // sit on the three other servers.
  t.decode = {{0, 0, 0}, {1, 1, 0}};
  t.prefill = {{1, 0, 4}, {2, 0, 0}, {3, 0, 0}, {0, 1, 4}, {2, 1, 4}, {3, 1, 4}};
  // 768 GiB (8 storage services x 96 GiB) per server / 1.42 TiB for the single server.
  t.pool_share_per_server = 768.0 / 1456.0;
  t.router_session_affinity = false;
  return t;
}

int Topology::groups() const {
  int n = 0;
  for (const EngineSlot& e : prefill) n = std::max(n, e.group + 1);
  for (const EngineSlot& e : decode) n = std::max(n, e.group + 1);
  return n;
}

uint64_t Topology::pool_tokens_per_server(const ModelGeometry& g) const {
  return static_cast<uint64_t>(static_cast<double>(g.pool_tokens) * pool_share_per_server);
}

int Topology::total_gpus(const ModelGeometry& g) const {
  return static_cast<int>(prefill.size()) * g.gpus_per_prefill_instance +
         static_cast<int>(decode.size()) * g.gpus_per_decode_instance;
}

Status Topology::Validate(const ModelGeometry& g) const {
  if (servers < 1 || rails < 1 || prefill.empty() || decode.empty() || pool_share_per_server <= 0) {
    return InvalidArgument(fmt::format("topology {}: needs servers, rails, a prefill and a decode instance", name));
  }
  // Engines may not share a GPU: mark each server's GPUs as the engines take them.
  std::vector<std::vector<bool>> taken(servers, std::vector<bool>(gpus_per_server, false));
  auto take = [&](const EngineSlot& e, int count, const char* kind) -> Status {
    if (e.server < 0 || e.server >= servers || e.group < 0) {
      return InvalidArgument(fmt::format("topology {}: a {} instance on server {} of {}", name, kind, e.server, servers));
    }
    for (int gpu = e.first_gpu; gpu < e.first_gpu + count; ++gpu) {
      if (gpu < 0 || gpu >= gpus_per_server || taken[e.server][gpu]) {
        return InvalidArgument(fmt::format("topology {}: a {} instance wants GPU {} of server {}, which {}", name,
                                           kind, gpu, e.server,
                                           gpu < 0 || gpu >= gpus_per_server ? "does not exist" : "is taken"));
      }
      taken[e.server][gpu] = true;
    }
    return Status::Ok();
  };
  std::vector<int> prefills(groups(), 0), decodes(groups(), 0);
  for (const EngineSlot& e : prefill) {
    KVPOOL_RETURN_IF_ERROR(take(e, g.gpus_per_prefill_instance, "prefill"));
    ++prefills[e.group];
  }
  for (const EngineSlot& e : decode) {
    KVPOOL_RETURN_IF_ERROR(take(e, g.gpus_per_decode_instance, "decode"));
    ++decodes[e.group];
  }
  for (int k = 0; k < groups(); ++k) {
    if (prefills[k] == 0 || decodes[k] == 0) {
      return InvalidArgument(fmt::format("topology {}: group {} needs a prefill and a decode instance", name, k));
    }
  }
  return Status::Ok();
}

Result<Topology> TopologyPreset(std::string_view name) {
  if (name == "4x8-6p2d") return Topology::FourServer6P2D();
  int servers = 0;
  if (name.size() > 2 && name.substr(name.size() - 2) == "x8") {
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size() - 2, servers);
    if (ec == std::errc() && end == name.data() + name.size() - 2 && servers >= 1 && servers <= 64) {
      return Topology::Uniform(servers);
    }
  }
  return InvalidArgument(
      fmt::format("unknown topology '{}' (choose 1x8, Nx8 for N servers of 1 prefill + 1 decode, or 4x8-6p2d)", name));
}

}  // namespace kvpool::engine
