// Prometheus text exposition of the pool's state (objects, bytes, evictions, hits).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "master/pool_metadata.h"

namespace kvpool::master {

// Appends gauges and counters describing `stats`, the pool of part `part`; the per-namespace
// series carry the part as a label, so the parts' hits and misses add up or compare.
void AppendPoolMetrics(const PoolStats& stats, uint32_t part, std::string* out);

// Where this master stands in its part's election (a lone master always leads, term 0).
struct LeadershipFigures {
  bool leading = false;
  int64_t term = 0;
  uint64_t elections_won = 0;
  uint64_t failovers = 0;
};
void AppendLeadershipMetrics(const LeadershipFigures& figures, std::string* out);

}  // namespace kvpool::master
