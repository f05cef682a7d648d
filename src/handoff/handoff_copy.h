// Gather and scatter of one (prefill rank, decode rank) pair of a HandoffPlan, on the CPU.
//
//   Gather:  prefill rank p's paged cache --> p's gather buffer for d   (rows in plan order)
//   Scatter: a gather buffer (landed on d)  --> decode rank d's paged cache
//
// This is the reference the CUDA kernels (handoff_copy_cuda.h) are tested against, and the
// path for CI. Both take an optional piece (one of the pair's HandoffWrites): then only that
// piece's rows move, and `buffer` points at the piece's first byte (as a landing slot does).
//
// Every block id the copy would use is checked against the cache first: a bad block table is
// INVALID_ARGUMENT, never a read or write outside the cache.
#pragma once

#include <cstddef>
#include <span>

#include "common/status.h"
#include "handoff/handoff_plan.h"

namespace kvpool::handoff {

// INVALID_ARGUMENT unless `cache` is valid and is prefill rank pair.prefill_rank's cache (kind,
// layers, block size, bytes), `table` (indexed by global token) covers the pair's tokens
// [pair.GlobalToken(0), pair.GlobalToken(num_tokens - 1)] and each of those blocks is below
// cache.num_blocks, and `piece` (if any) is one of the pair's writes.
Status CheckGather(const PairPlan& pair, const PagedKvCache& cache, std::span<const BlockId> table,
                   const HandoffWrite* piece = nullptr);
// The same for decode rank pair.decode_rank's cache: `table` is indexed by local token and must
// cover [pair.first_local, pair.first_local + pair.num_tokens).
Status CheckScatter(const PairPlan& pair, const PagedKvCache& cache, std::span<const BlockId> table,
                    const HandoffWrite* piece = nullptr);

// Copies the pair's rows (or `piece`'s) from the prefill cache into `buffer`.
// REQUIRES: buffer holds pair.bytes() (or piece->length) bytes.
Status GatherCpu(const PairPlan& pair, const PagedKvCache& prefill_cache, std::span<const BlockId> prefill_table,
                 std::byte* buffer, const HandoffWrite* piece = nullptr);

// Copies the pair's rows (or `piece`'s) from `buffer` into the decode cache; touches no other
// byte of the cache.
Status ScatterCpu(const PairPlan& pair, const std::byte* buffer, const PagedKvCache& decode_cache,
                  std::span<const BlockId> decode_table, const HandoffWrite* piece = nullptr);

}  // namespace kvpool::handoff
