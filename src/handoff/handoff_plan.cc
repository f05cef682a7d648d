#include "handoff/handoff_plan.h"

#include <fmt/format.h>

namespace kvpool::handoff {
namespace {

// Splits `rows` rows of `row_bytes` into the fewest pieces of at most `max_bytes`, sizes as
// equal as whole rows allow (so pipelined pieces take about the same time).
// REQUIRES: row_bytes <= max_bytes.
std::vector<HandoffWrite> SplitRows(uint64_t rows, uint64_t row_bytes, uint64_t max_bytes) {
  std::vector<HandoffWrite> writes;
  if (rows == 0) return writes;
  const uint64_t max_rows = max_bytes / row_bytes;
  const uint64_t pieces = (rows + max_rows - 1) / max_rows;
  const uint64_t base = rows / pieces, extra = rows % pieces;  // first `extra` pieces get one more
  uint64_t row = 0;
  for (uint64_t i = 0; i < pieces; ++i) {
    const uint64_t n = base + (i < extra ? 1 : 0);
    writes.push_back({row * row_bytes, n * row_bytes, row, n});
    row += n;
  }
  return writes;
}

}  // namespace

uint64_t HandoffPlan::total_bytes() const {
  uint64_t n = 0;
  for (const PairPlan& p : pairs) n += p.bytes();
  return n;
}

uint64_t HandoffPlan::total_writes() const {
  uint64_t n = 0;
  for (const PairPlan& p : pairs) n += p.writes.size();
  return n;
}

uint64_t HandoffPlan::rank_bytes(uint32_t p) const {
  uint64_t n = 0;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) n += pair(p, d).bytes();
  return n;
}

uint64_t HandoffPlan::rank_writes(uint32_t p) const {
  uint64_t n = 0;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) n += pair(p, d).writes.size();
  return n;
}

Result<HandoffPlan> PlanHandoff(const PrefillLayout& prefill, const DecodeLayout& decode, uint64_t first_token,
                                uint64_t end_token, const HandoffPlanOptions& options) {
  KVPOOL_RETURN_IF_ERROR(ValidateHandoffLayouts(prefill, decode));
  if (end_token <= first_token) {
    return InvalidArgument(fmt::format("handoff plan: token range [{}, {}) is empty", first_token, end_token));
  }
  const PagedKvLayout decode_rank_layout = decode.RankLayout();
  const uint32_t row_bytes = decode_rank_layout.plane_token_bytes();
  if (options.max_write_bytes < row_bytes) {
    return InvalidArgument(fmt::format("handoff plan: max_write_bytes {} is below one token's plane ({} B)",
                                       options.max_write_bytes, row_bytes));
  }
  HandoffPlan plan;
  plan.prefill = prefill;
  plan.decode = decode;
  plan.first_token = first_token;
  plan.end_token = end_token;
  plan.max_write_bytes = options.max_write_bytes;
  const DcpTokenMap map = decode.token_map();
  plan.pairs.reserve(uint64_t{prefill.num_ranks()} * decode.dcp_ranks);
  for (uint32_t p = 0; p < prefill.num_ranks(); ++p) {
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      PairPlan pair;
      pair.prefill_rank = p;
      pair.decode_rank = d;
      pair.kind = prefill.kind;
      pair.num_layers = prefill.stage_layers[p];
      pair.first_layer = prefill.first_layer(p);
      pair.decode_num_layers = decode.num_layers;
      pair.planes_per_layer = decode_rank_layout.planes_per_layer();
      pair.plane_token_bytes = row_bytes;
      pair.prefill_block_tokens = prefill.block_tokens;
      pair.decode_block_tokens = decode.block_tokens;
      pair.token_map = map;
      // d's tokens below first_token are exactly its local tokens [0, first_local).
      pair.first_local = map.CountBelow(d, first_token);
      pair.num_tokens = map.CountBelow(d, end_token) - pair.first_local;
      pair.writes = SplitRows(pair.num_rows(), row_bytes, options.max_write_bytes);
      plan.pairs.push_back(std::move(pair));
    }
  }
  return plan;
}

}  // namespace kvpool::handoff
