// CostModel: how long emulated compute and data movement take, in emulated seconds.
//
// Nothing here sleeps. The replay runs in emulated (virtual) time; `--speedup` only paces
// that time against the wall clock (simulation.h), so trace waits and compute shrink together.
//
// Prefill (one pipeline-parallel instance): a micro-batch of chunked prefill computes slices
// [start, end) of several requests; the busiest stage spends
//     overhead + per_token * sum(end - start) + per_attention_pair * sum((end^2 - start^2) / 2)
// on it (causal attention: token p attends to p earlier tokens, the quadratic term), the
// other stages that times their share of its layers. A full pipeline finishes one micro-batch
// per busiest-stage time; a lone micro-batch takes the sum over the stages.
// Decode (one instance): a step produces one token for each of `batch` sequences and reads
// the KV of all of them:  overhead + per_sequence * batch + per_context_token * total_context.
// Restore / handoff: reference bytes (the published model's) over a per-GPU bandwidth, so a
// byte-scaled run still reports published-scale times; a restore's bytes that come from the SSD
// tier go at the SSD's bandwidth instead.
#pragma once

#include <cstdint>
#include <span>

#include "engine/model_geometry.h"

namespace kvpool::engine {

struct CostModelParams {
  double prefill_iteration_overhead_s = 0;
  double prefill_s_per_token = 0;
  double prefill_s_per_attention_pair = 0;
  double decode_step_overhead_s = 0;
  double decode_s_per_sequence = 0;
  double decode_s_per_context_token = 0;
  double restore_fixed_s = 0;              // per restore: lookup, leases, first window
  double restore_bytes_per_s_per_gpu = 0;  // pool -> one stage GPU's paged cache
  // The share of its store's SSD tier one stage GPU reads at when its restore finds chunks
  // there (read from the file, then the same path on): those bytes go at the slower of the two.
  double ssd_read_bytes_per_s_per_gpu = 0;
  double handoff_fixed_s = 0;
  double handoff_bytes_per_s = 0;          // prefill -> decode, all links of one request
  // Between servers (rail_network.h): each NIC, each direction. <= 0: unlimited.
  double rail_bytes_per_s_per_nic = 0;

  // Calibrated so the published 8-GPU server (geometry "published"/"scaled": one PP4
  // prefill + one TP4/DCP4 decode instance) saturates near the published ~44K tok/s/GPU.
  // See cost_model.cc for the reasoning behind every constant.
  static CostModelParams Published();
};

// One request's share of a prefill iteration: it computes tokens [start, end).
struct PrefillSlice {
  uint64_t start = 0;
  uint64_t end = 0;
};

class CostModel {
 public:
  CostModel(CostModelParams params, const ModelGeometry& geometry);

  // The busiest stage's time for one micro-batch: the pipeline's throughput when full.
  double PrefillIterationSeconds(std::span<const PrefillSlice> slices) const;
  // Stage `stage`'s time for the same micro-batch (the busiest stage's scaled by its layers;
  // with tensor-parallel prefill, one stage of all the GPUs).
  double PrefillStageSeconds(uint32_t stage, std::span<const PrefillSlice> slices) const;
  // REQUIRES: batch >= 1.
  double DecodeStepSeconds(uint64_t batch, uint64_t total_context_tokens) const;
  // Time for pipeline stage `stage` to read and unpack `tokens` restored tokens, `ssd_tokens`
  // of which its store read from the SSD tier. REQUIRES: ssd_tokens <= tokens.
  double StageRestoreSeconds(uint32_t stage, uint64_t tokens, uint64_t ssd_tokens = 0) const;
  // Time to hand `tokens` of one request's KV (every stage) to decode.
  double HandoffSeconds(uint64_t tokens) const;

  const CostModelParams& params() const { return params_; }

 private:
  CostModelParams params_;
  ModelGeometry geometry_;
};

}  // namespace kvpool::engine
