// ComputeStats: the figures that say what a corpus is like (the same ones the published
// corpus reports), as text for people and JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "trace/reuse_ceiling.h"
#include "trace/trace.h"

namespace kvpool::trace {

// The context length the published corpus is compared against (10 of its 393 traces exceed it).
inline constexpr int64_t kReferenceMaxContextTokens = 917'504;

struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;  // nearest-rank percentiles
  double p90 = 0;
  double max = 0;
};
Distribution Summarize(std::vector<double> values);

struct TraceStats {
  TraceFormat format = TraceFormat::kAgentX;
  int64_t traces = 0;
  int64_t requests = 0;            // top-level + subagent
  int64_t top_level_requests = 0;  // main-thread turns
  int64_t subagent_requests = 0;
  int64_t subagents = 0;
  int64_t background_subagents = 0;  // gate no parent turn
  int64_t max_fan_out = 0;           // most subagents spawned after one parent turn
  int64_t dropped_subagents = 0;         // from the loader
  int64_t skipped_over_max_context = 0;  // from the loader
  int64_t traces_over_reference_context = 0;  // peak in+out > kReferenceMaxContextTokens

  // Per request (main and subagent). New tokens = input minus the leading blocks already
  // seen by the reuse-ceiling walk: what an unbounded prefix cache would still prefill.
  Distribution input_tokens;
  Distribution new_tokens;
  Distribution output_tokens;
  Distribution think_time_s;
  // Per trace.
  Distribution main_turns;
  Distribution session_duration_s;  // first start to last end, over all its requests
  Distribution first_input_tokens;  // the main thread's first prompt
  Distribution last_input_tokens;   // the main thread's last prompt
  Distribution peak_context_tokens;

  ReuseCeiling ceiling;
};

TraceStats ComputeStats(const Corpus& corpus);
std::string FormatStatsText(const TraceStats& stats);
nlohmann::json StatsToJson(const TraceStats& stats);

}  // namespace kvpool::trace
