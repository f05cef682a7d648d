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
  // With StatsOptions::quantiles = n: the nearest-rank quantiles at 0, 1/n, ..., 1 (n + 1
  // values, the first the minimum), enough to draw the distribution.
  std::vector<double> quantiles;
};
Distribution Summarize(std::vector<double> values, int quantiles = 0);

struct StatsOptions {
  // Traces whose peak input+output exceeds this are counted (not left out).
  int64_t max_context_tokens = kReferenceMaxContextTokens;
  int quantiles = 0;  // see Distribution::quantiles; 0 = none
};

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
  int64_t skipped_invalid = 0;           // from the loader
  int64_t max_context_tokens = 0;        // StatsOptions::max_context_tokens
  int64_t traces_over_max_context = 0;   // peak in+out > max_context_tokens
  // Requests whose file lacks a timing field. The replay waits for the gap between recorded
  // start times where api_time is missing; think_time it does not use.
  int64_t requests_missing_api_time = 0;
  int64_t requests_missing_think_time = 0;
  int64_t requests_missing_timing = 0;  // either
  // Requests whose prompt ends inside a block (tokens past the last hash id): most real ones.
  int64_t requests_with_partial_tail = 0;

  // Per request (main and subagent). New tokens = input minus the leading blocks already
  // seen by the reuse-ceiling walk: what an unbounded prefix cache would still prefill.
  Distribution input_tokens;
  Distribution new_tokens;
  Distribution output_tokens;
  Distribution think_time_s;  // recorded values only
  // Per request but a thread's first: its start minus the previous request's end in its own
  // thread (a subagent's first: minus the end of the parent turn that spawned it), the wait a
  // replay honours before its idle cap.
  Distribution gap_s;
  // Per trace.
  Distribution main_turns;
  Distribution session_duration_s;  // first start to last end, over all its requests
  Distribution first_input_tokens;  // the main thread's first prompt
  Distribution last_input_tokens;   // the main thread's last prompt
  Distribution peak_context_tokens;

  ReuseCeiling ceiling;  // by blocks
  // By tokens: the leading hit blocks' tokens over all input tokens (tails included).
  int64_t ceiling_hit_tokens = 0;
  int64_t input_tokens_total = 0;
  double token_ceiling() const {
    return input_tokens_total == 0 ? 0.0 : double(ceiling_hit_tokens) / double(input_tokens_total);
  }
};

TraceStats ComputeStats(const Corpus& corpus, const StatsOptions& options = {});
std::string FormatStatsText(const TraceStats& stats);
nlohmann::json StatsToJson(const TraceStats& stats);

}  // namespace kvpool::trace
