// RequestRecord: everything the replay measures about one request, in emulated seconds
// unless a field says "real".
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvpool::engine {

struct RequestRecord {
  uint64_t request_id = 0;
  uint64_t session_id = 0;
  bool counted = true;  // false for primer and warm-up requests (set by the driver)
  bool failed = false;
  std::string failure;  // why, when failed
  int prefill_instance = -1;
  int decode_instance = -1;

  double arrival_s = 0;      // submitted to the deployment
  double admitted_s = 0;     // passed the KV admission gate
  double prefill_ready_s = 0;  // restore done: waiting for compute
  double first_token_s = 0;  // prefill done and KV handed to decode
  double finish_s = 0;       // last output token

  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  // Where the prompt tokens came from; the three add up to input_tokens.
  uint64_t gpu_cached_tokens = 0;
  uint64_t pool_tokens = 0;
  uint64_t computed_tokens = 0;
  uint64_t pool_ssd_tokens = 0;  // of pool_tokens: chunks some stage read from the SSD tier
  // Tokens an unbounded prefix cache would have served (the trace's reuse ceiling walk).
  uint64_t ceiling_hit_tokens = 0;

  std::vector<double> stage_restore_s;  // per pipeline stage; empty when nothing was restored
  // The restore on the request's critical path: from its start in prefill to its last stage's
  // restore done. The slowest stage_restore_s, unless a prefetch ran part of it before.
  double restore_wait_s = 0;
  bool prefetched = false;              // its restore started before it did
  double restore_real_s = 0;            // lookup + restore + verify, wall clock
  double handoff_s = 0;
  double handoff_real_s = 0;            // copy + verify, wall clock
  uint64_t restore_bytes = 0;           // read from the pool (this process's bytes)
  uint64_t save_bytes = 0;              // written to the pool
  uint64_t handoff_bytes = 0;
  uint64_t restore_fallback_tokens = 0;  // planned from the pool, computed instead
  uint64_t verification_errors = 0;      // (token, layer) entries with wrong bytes: must be 0

  double ttft_s() const { return first_token_s - arrival_s; }
  // Slowest minus fastest stage restore: how long the first stage done waits for the last.
  double restore_stage_spread_s() const {
    if (stage_restore_s.empty()) return 0;
    const auto [lo, hi] = std::minmax_element(stage_restore_s.begin(), stage_restore_s.end());
    return *hi - *lo;
  }
};

}  // namespace kvpool::engine
