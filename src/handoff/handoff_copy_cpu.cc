// The CPU reference: one memcpy per row (one token's bytes of one plane). Deliberately plain —
// the address of each row is computed from the plan exactly as handoff_plan.h defines it, so
// the kernels have an independent model to be compared with.
#include <cstring>

#include "handoff/handoff_copy.h"

namespace kvpool::handoff {
namespace {

enum class Direction { kGather, kScatter };

// Cache address of buffer row `row` of `pair` on the given side.
std::byte* RowAddress(const PairPlan& pair, Direction side, const PagedKvCache& cache, std::span<const BlockId> table,
                      uint64_t row) {
  const uint64_t plane = row / pair.num_tokens;  // layer_of_p * planes + plane
  const uint64_t j = row % pair.num_tokens;
  const uint32_t layer = static_cast<uint32_t>(plane / pair.planes_per_layer);
  const uint32_t plane_in_layer = static_cast<uint32_t>(plane % pair.planes_per_layer);
  if (side == Direction::kGather) {
    return cache.TokenAddress(table, layer, plane_in_layer, pair.GlobalToken(j));
  }
  return cache.TokenAddress(table, pair.first_layer + layer, plane_in_layer, pair.first_local + j);
}

void CopyRows(const PairPlan& pair, Direction dir, const PagedKvCache& cache, std::span<const BlockId> table,
              std::byte* buffer, const HandoffWrite* piece) {
  const uint64_t first_row = piece ? piece->first_row : 0;
  const uint64_t num_rows = piece ? piece->num_rows : pair.num_rows();
  const uint32_t row_bytes = pair.plane_token_bytes;
  for (uint64_t i = 0; i < num_rows; ++i) {
    std::byte* cached = RowAddress(pair, dir, cache, table, first_row + i);
    std::byte* buffered = buffer + i * row_bytes;
    if (dir == Direction::kGather) {
      std::memcpy(buffered, cached, row_bytes);
    } else {
      std::memcpy(cached, buffered, row_bytes);
    }
  }
}

}  // namespace

Status GatherCpu(const PairPlan& pair, const PagedKvCache& prefill_cache, std::span<const BlockId> prefill_table,
                 std::byte* buffer, const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(CheckGather(pair, prefill_cache, prefill_table, piece));
  if (pair.num_tokens == 0) return Status::Ok();
  if (buffer == nullptr) return InvalidArgument("handoff gather: no buffer");
  CopyRows(pair, Direction::kGather, prefill_cache, prefill_table, buffer, piece);
  return Status::Ok();
}

Status ScatterCpu(const PairPlan& pair, const std::byte* buffer, const PagedKvCache& decode_cache,
                  std::span<const BlockId> decode_table, const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(CheckScatter(pair, decode_cache, decode_table, piece));
  if (pair.num_tokens == 0) return Status::Ok();
  if (buffer == nullptr) return InvalidArgument("handoff scatter: no buffer");
  // The buffer is only read; CopyRows shares one body for both directions.
  CopyRows(pair, Direction::kScatter, decode_cache, decode_table, const_cast<std::byte*>(buffer), piece);
  return Status::Ok();
}

}  // namespace kvpool::handoff
