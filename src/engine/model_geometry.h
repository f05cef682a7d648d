// ModelGeometry: the shape of the emulated deployment's KV — layers per pipeline stage,
// bytes per token, block and chunk sizes — and how much KV each part holds (prefill GPU
// prefix cache, decode KV, pool), in tokens.
//
// Capacities are in *tokens*, because the trace is in tokens: the published ratios
// (prefill GPU KV : pool : live session history, design.md) are ratios of tokens held. A
// scaled preset keeps every token count of the published server and shrinks only the bytes
// per token, so the same replay moves ~1/1500 of the bytes and fits a 2-core, 24 GB machine.
// The cost model times restores and handoffs with the *reference* (published) bytes, so a
// scaled run still reports published-scale emulated times.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "connector/kv_namespace.h"

namespace kvpool::engine {

struct ModelGeometry {
  std::string name;
  // What the paged caches really hold in this process (model_id is salted per run by the
  // deployment so runs never see each other's chunks).
  connector::KvModelSpec spec;
  // The published model the run stands for: per-stage layers and bytes per token-layer, used
  // by the cost model for restore and handoff times.
  std::vector<uint32_t> reference_stage_layers;
  uint32_t reference_bytes_per_token_per_layer = 0;

  // How many instances, and on which servers: topology.h.
  int gpus_per_prefill_instance = 4;  // one per pipeline stage
  int gpus_per_decode_instance = 4;   // TP4 + DCP4
  // Decode's context parallelism: DCP rank r of a decode instance holds token g, every layer,
  // when (g / decode_dcp_interleave) % decode_dcp_ranks == r (handoff_layouts.h). Its TP ranks
  // beyond DCP would hold copies of the same bytes and are not emulated.
  uint32_t decode_dcp_ranks = 4;
  uint32_t decode_dcp_interleave = 1;

  uint64_t prefill_cache_tokens = 0;  // GPU prefix cache of one prefill instance
  uint64_t decode_kv_tokens = 0;      // KV one decode instance holds, all DCP ranks (the gate's bound)
  uint64_t pool_tokens = 0;           // the pool's capacity, whole chunks
  uint32_t max_batched_tokens = 8192;  // chunked-prefill budget per micro-batch
  // Prefill's 4 GPUs as one tensor-parallel engine (TP4) instead of a PP4 pipeline: every
  // micro-batch uses all of them, so there is no pipeline to fill. Each GPU still holds and
  // moves its quarter of every token's KV bytes (the same 4 shards, on its own rail).
  bool prefill_tensor_parallel = false;
  int64_t max_context_tokens = 917'504;  // traces peaking above it are skipped

  uint64_t bytes_per_token() const;            // spec: all stages
  uint64_t reference_bytes_per_token() const;  // the published model's
  uint64_t reference_stage_bytes_per_token(uint32_t stage) const;
  uint64_t pool_bytes() const;  // pool_tokens at this geometry's bytes per token
  // Micro-batches prefill can have in flight: one per pipeline stage (1 with TP).
  size_t prefill_pipeline_depth() const {
    return prefill_tensor_parallel ? 1 : reference_stage_layers.size();
  }

  Status Validate() const;
};

// "scaled" (the default: published token capacities, 32 B per token), "published" (78
// layers, 48,672 B per token: for GPU machines), "tiny" (tests: small caches and pool).
Result<ModelGeometry> GeometryPreset(std::string_view name);
std::vector<std::string> GeometryPresetNames();

}  // namespace kvpool::engine
