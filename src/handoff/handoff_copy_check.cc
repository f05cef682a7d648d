// The checks every gather/scatter (CPU and CUDA) runs before touching memory.
#include <fmt/format.h>

#include "handoff/handoff_copy.h"

namespace kvpool::handoff {
namespace {

Status CheckLayout(const char* side, const PagedKvLayout& have, KvLayoutKind kind, uint32_t num_layers,
                   uint32_t block_tokens, uint32_t plane_token_bytes) {
  if (have.kind != kind || have.num_layers != num_layers || have.block_tokens != block_tokens ||
      have.plane_token_bytes() != plane_token_bytes) {
    return InvalidArgument(fmt::format(
        "handoff {}: cache has {} layers x {} plane(s) of {} B per token in blocks of {}; the plan needs {} layers x "
        "{} plane(s) of {} B in blocks of {}",
        side, have.num_layers, have.planes_per_layer(), have.plane_token_bytes(), have.block_tokens, num_layers,
        kind == KvLayoutKind::kLatent ? 1 : 2, plane_token_bytes, block_tokens));
  }
  return Status::Ok();
}

// Every block holding a token in [lo, hi] (inclusive) exists in `table` and in the cache.
Status CheckBlocks(const char* side, std::span<const BlockId> table, uint64_t num_blocks, uint32_t block_tokens,
                   uint64_t lo, uint64_t hi) {
  const uint64_t first = lo / block_tokens, last = hi / block_tokens;
  if (last >= table.size()) {
    return InvalidArgument(fmt::format("handoff {}: tokens up to {} need {} blocks, block table has {}", side, hi,
                                       last + 1, table.size()));
  }
  for (uint64_t b = first; b <= last; ++b) {
    const BlockId id = table[b];
    if (id < 0 || static_cast<uint64_t>(id) >= num_blocks) {
      return InvalidArgument(
          fmt::format("handoff {}: block table entry {} is block {}, cache has {} blocks", side, b, id, num_blocks));
    }
  }
  return Status::Ok();
}

Status CheckPiece(const PairPlan& pair, const HandoffWrite* piece) {
  if (piece == nullptr) return Status::Ok();
  for (const HandoffWrite& w : pair.writes) {
    if (&w == piece) return Status::Ok();
  }
  // A copy of a write is fine too, as long as it is one of the pair's.
  for (const HandoffWrite& w : pair.writes) {
    if (w.offset == piece->offset && w.length == piece->length && w.first_row == piece->first_row &&
        w.num_rows == piece->num_rows) {
      return Status::Ok();
    }
  }
  return InvalidArgument(fmt::format("handoff: piece at offset {} ({} B) is not one of pair ({}, {})'s writes",
                                     piece->offset, piece->length, pair.prefill_rank, pair.decode_rank));
}

}  // namespace

Status CheckGather(const PairPlan& pair, const PagedKvCache& cache, std::span<const BlockId> table,
                   const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(cache.Validate());
  KVPOOL_RETURN_IF_ERROR(CheckLayout("gather (prefill side)", cache.layout, pair.kind, pair.num_layers,
                                     pair.prefill_block_tokens, pair.plane_token_bytes));
  KVPOOL_RETURN_IF_ERROR(CheckPiece(pair, piece));
  if (pair.num_tokens == 0) return Status::Ok();
  return CheckBlocks("gather (prefill side)", table, cache.num_blocks, pair.prefill_block_tokens, pair.GlobalToken(0),
                     pair.GlobalToken(pair.num_tokens - 1));
}

Status CheckScatter(const PairPlan& pair, const PagedKvCache& cache, std::span<const BlockId> table,
                    const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(cache.Validate());
  KVPOOL_RETURN_IF_ERROR(CheckLayout("scatter (decode side)", cache.layout, pair.kind, pair.decode_num_layers,
                                     pair.decode_block_tokens, pair.plane_token_bytes));
  if (pair.first_layer + pair.num_layers > pair.decode_num_layers) {
    return InvalidArgument(fmt::format("handoff scatter: layers [{}, {}) are beyond the decode cache's {}",
                                       pair.first_layer, pair.first_layer + pair.num_layers, pair.decode_num_layers));
  }
  KVPOOL_RETURN_IF_ERROR(CheckPiece(pair, piece));
  if (pair.num_tokens == 0) return Status::Ok();
  return CheckBlocks("scatter (decode side)", table, cache.num_blocks, pair.decode_block_tokens, pair.first_local,
                     pair.first_local + pair.num_tokens - 1);
}

}  // namespace kvpool::handoff
