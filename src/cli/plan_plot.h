// The plot of `kvpool plan`: predicted reuse (GPU cache + pool, and the pool's share) against
// pool size, with the trace's ceiling, as one self-contained SVG (no plotting library, so an
// operator's box needs nothing but the binary).
#pragma once

#include <string>
#include <vector>

namespace kvpool::cli {

struct PlanPlotPoint {
  double pool_tokens = 0;
  double reuse = 0;       // shares of prompt tokens, 0..1
  double pool_share = 0;
};

// REQUIRES: points sorted by pool_tokens, not empty.
std::string PlanPlotSvg(const std::vector<PlanPlotPoint>& points, double ceiling, const std::string& title);

}  // namespace kvpool::cli
