// HandoffPlan: what moves where when a request's tokens [first_token, end_token) cross from
// prefill to decode (layouts in handoff_layouts.h).
//
// For every (prefill rank p, decode rank d) pair there is one contiguous *gather buffer* on p:
// the KV of p's layers for exactly the tokens of the range that d holds. It is a sequence of
// rows of plane_token_bytes each, in the order
//
//   row = (layer_of_p * planes_per_layer + plane) * num_tokens + j
//
// where j counts d's tokens in the range in ascending order. Because d's local token order
// follows global order, the j-th token is d's local token first_local + j (global token
// DcpTokenMap::Global(d, first_local + j)), so a row's source and destination addresses follow
// from a handful of integers: the plan is O(ranks) parameters, never a per-token list, and a
// kernel computes every address itself.
//
// Each gather buffer is moved in *writes* of at most max_write_bytes (default 8 MiB): row-aligned
// pieces of nearly equal size, so the gather/copy/scatter pipeline works piece by piece.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "handoff/handoff_layouts.h"

namespace kvpool::handoff {

inline constexpr uint64_t kDefaultMaxWriteBytes = uint64_t{8} << 20;

// One large write: rows [first_row, first_row + num_rows) of a gather buffer, which are its
// bytes [offset, offset + length). length <= the plan's max_write_bytes.
struct HandoffWrite {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t first_row = 0;
  uint64_t num_rows = 0;
};

// Everything about one (prefill rank, decode rank) pair; self-contained so a kernel can take it
// by value (the writes aside).
struct PairPlan {
  uint32_t prefill_rank = 0;
  uint32_t decode_rank = 0;
  KvLayoutKind kind = KvLayoutKind::kLatent;
  uint32_t num_layers = 0;         // the prefill rank's layers
  uint32_t first_layer = 0;        // decode layer that prefill layer 0 lands in
  uint32_t decode_num_layers = 0;  // layers of the decode cache (all of the model's)
  uint32_t planes_per_layer = 1;
  uint32_t plane_token_bytes = 0;
  uint32_t prefill_block_tokens = 0;
  uint32_t decode_block_tokens = 0;
  DcpTokenMap token_map;
  uint64_t first_local = 0;  // decode-local index of the first of d's tokens in the range
  uint64_t num_tokens = 0;   // d's tokens in the range (may be 0: then nothing moves)
  std::vector<HandoffWrite> writes;

  uint64_t num_rows() const { return uint64_t{num_layers} * planes_per_layer * num_tokens; }
  uint64_t bytes() const { return num_rows() * plane_token_bytes; }
  // Global token of the j-th of d's tokens in the range. REQUIRES: j < num_tokens.
  uint64_t GlobalToken(uint64_t j) const { return token_map.Global(decode_rank, first_local + j); }
};

struct HandoffPlanOptions {
  uint64_t max_write_bytes = kDefaultMaxWriteBytes;
};

struct HandoffPlan {
  PrefillLayout prefill;
  DecodeLayout decode;
  uint64_t first_token = 0;
  uint64_t end_token = 0;
  uint64_t max_write_bytes = kDefaultMaxWriteBytes;
  std::vector<PairPlan> pairs;  // index p * decode.dcp_ranks + d

  const PairPlan& pair(uint32_t p, uint32_t d) const { return pairs[uint64_t{p} * decode.dcp_ranks + d]; }
  // Totals, for reporting: every pair's bytes and writes.
  uint64_t total_bytes() const;
  uint64_t total_writes() const;
  // The same for one prefill rank (what one PP GPU sends).
  uint64_t rank_bytes(uint32_t p) const;
  uint64_t rank_writes(uint32_t p) const;
};

// Plans tokens [first_token, end_token) of one request. INVALID_ARGUMENT when the layouts are
// invalid or incompatible (ValidateHandoffLayouts), the range is empty or reversed, or one row
// (plane_token_bytes) does not fit into max_write_bytes.
Result<HandoffPlan> PlanHandoff(const PrefillLayout& prefill, const DecodeLayout& decode, uint64_t first_token,
                                uint64_t end_token, const HandoffPlanOptions& options = {});

}  // namespace kvpool::handoff
