#include "engine/rail_network.h"

#include <algorithm>

namespace kvpool::engine {

RailNetwork::RailNetwork(int servers, int nics, double bytes_per_s)
    : servers_(servers),
      nics_(nics),
      bytes_per_s_(bytes_per_s),
      out_free_at_(static_cast<size_t>(servers) * nics, 0.0),
      in_free_at_(static_cast<size_t>(servers) * nics, 0.0) {}

double RailNetwork::Transfer(int from, int from_nic, int to, int to_nic, double bytes, double now) {
  if (from == to || bytes <= 0) return now;
  ++counters_.transfers;
  counters_.bytes += bytes;
  if (bytes_per_s_ <= 0) return now;
  double& out = out_free_at_[static_cast<size_t>(from) * nics_ + from_nic];
  double& in = in_free_at_[static_cast<size_t>(to) * nics_ + to_nic];
  const double start = std::max({now, out, in});
  const double end = start + bytes / bytes_per_s_;
  counters_.queued_s += start - now;
  out = end;
  in = end;
  return end;
}

}  // namespace kvpool::engine
