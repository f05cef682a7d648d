// ReplaySummary: what one replay run measured, from its request records — throughput per
// GPU, TTFT, per-user generation speed, where prompt tokens came from against the trace's
// reuse ceiling, restore and handoff times, bytes moved, verification errors, failures.
// As JSON (for `kvpool report` and scripts) and as a short human summary.
//
// Definitions (design.md): throughput per GPU = (prompt tokens, cached or not, + generated
// tokens) of the counted requests that finished inside the measurement window / window
// length (emulated seconds) / all GPUs of the deployment. Latency and token-source figures
// use the same requests. Failures count every counted request that failed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/deployment.h"
#include "engine/request_record.h"
#include "replay/return_predictor.h"

namespace kvpool::replay {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
};
Percentiles ComputePercentiles(std::vector<double> values);

// The embedded pool's own counters over the whole run (warm-up included): what its DRAM
// evicted and what its SSD tier (issue 17) took and gave back.
struct PoolCounters {
  uint64_t capacity_bytes = 0, ssd_capacity_bytes = 0;
  uint64_t used_bytes = 0, ssd_used_bytes = 0;  // at the end of the run
  uint64_t evicted_objects = 0;  // dropped for good (from DRAM, or whole groups from both tiers)
  uint64_t demotions = 0, demotion_failures = 0;
  uint64_t promotions = 0, promotion_failures = 0;
  uint64_t ssd_hits = 0, ssd_evictions = 0;
  PoolCounters& operator+=(const PoolCounters& other);
};

struct ReplaySummary {
  std::string mode;  // "pool" | "no-pool"
  // With a pool on several servers: "shared" (one pool over every server's memory) or "split"
  // (each server's own, for its own prefill instances); "" otherwise.
  std::string pool_scope;
  std::string geometry;
  std::string topology;  // engine::Topology's name
  int servers = 1;
  int sessions = 0;  // concurrent session lanes; 0: an open-loop replay by timestamp
  double arrival_rate = 0;  // > 0: the lanes' main turns paced by Poisson arrivals (requests/s)
  std::string prefill = "pp4";  // "pp4" (a pipeline of 4 stages) or "tp4"
  int gpus = 0;
  std::string kv_memory = "host";  // where the paged caches live: "host" or "N CUDA devices"
  std::string handoff;             // the engine::KvHandoff's name
  double speedup = 0;
  // The client's max_tokens (0: each request's recorded output, forced) and what the KV
  // admission gate reserved for output: "max_tokens", "recorded output" (equal to max_tokens
  // when the client asks for the recorded length) or "recorded output (oracle)".
  int64_t max_tokens = 0;
  std::string gate_reserves;
  double window_start_s = 0, window_s = 0;  // emulated
  double wall_s = 0;                        // real time the run took
  // With --speedup: the longest the real work held the emulated clock behind its pace (wall
  // seconds), e.g. a pool call waiting for a new master. Emulated figures do not see it.
  double max_lag_s = 0;
  int64_t requests = 0;         // counted, finished in the window
  int64_t uncounted_requests = 0;  // primer and warm-up
  int64_t failed_requests = 0;
  std::string first_failure;
  int64_t traces_skipped = 0;

  uint64_t prompt_tokens = 0, generated_tokens = 0;
  double throughput_tok_s = 0, throughput_tok_s_per_gpu = 0;
  Percentiles ttft_s;
  Percentiles gate_wait_s;  // arrival -> admitted by the decode KV gate (part of TTFT)
  Percentiles prefill_s;    // admitted -> KV handed to decode (queue, restore, compute, handoff)
  Percentiles user_gen_tok_s;  // per request: (output - 1) / decode time

  uint64_t gpu_cache_tokens = 0, pool_tokens = 0, computed_tokens = 0, ceiling_tokens = 0;
  uint64_t pool_ssd_tokens = 0;  // of pool_tokens, in chunks some stage read from the SSD tier
  double gpu_share() const { return prompt_tokens ? double(gpu_cache_tokens) / prompt_tokens : 0; }
  double pool_share() const { return prompt_tokens ? double(pool_tokens) / prompt_tokens : 0; }
  double computed_share() const { return prompt_tokens ? double(computed_tokens) / prompt_tokens : 0; }
  double reuse() const { return gpu_share() + pool_share(); }
  double ceiling() const { return prompt_tokens ? double(ceiling_tokens) / prompt_tokens : 0; }

  int64_t restores = 0;
  Percentiles stage_restore_s;      // emulated, per stage restore
  Percentiles restore_stage_wait_s;  // first-to-last stage
  // The restore on the critical path: from a request's start in prefill to its restore done
  // (RequestRecord::restore_wait_s); a prefetch shortens it.
  Percentiles restore_critical_s;
  double restore_critical_total_s = 0;
  int64_t prefetched_restores = 0;
  Percentiles restore_real_s;       // lookup + restore + verify, wall clock
  Percentiles handoff_s, handoff_real_s;
  uint64_t restore_bytes = 0, save_bytes = 0, handoff_bytes = 0;
  uint64_t restore_fallback_tokens = 0;
  uint64_t verification_errors = 0;
  engine::DeploymentCounters deployment;
  std::optional<PoolCounters> pool_counters;  // embedded pools only
  // With predicted retention hints (--retention session): how the router's predictions of
  // when each waiting thread comes back did (return_predictor.h).
  std::optional<ReturnPredictionScore> return_predictions;
};

// Summarizes `records` over the window [window_start_s, window_end_s].
ReplaySummary Summarize(std::span<const engine::RequestRecord> records, double window_start_s, double window_end_s,
                        int gpus);

nlohmann::json SummaryToJson(const ReplaySummary& s);
std::string FormatSummary(const ReplaySummary& s);

}  // namespace kvpool::replay
