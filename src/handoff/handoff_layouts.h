// Where a request's KV lives on each side of the prefill -> decode handoff.
//
// Prefill runs pipeline parallel (PP): rank p holds EVERY token of the request for its own
// layer range [first_layer(p), first_layer(p) + stage_layers[p]). Its cache is a connector
// PagedKvCache over those layers, and the request has one block table per prefill rank, in
// logical (global) token order: token g sits in block table[g / block_tokens].
//
// Decode runs tensor parallel + decode context parallel (DCP) over W ranks with interleave I:
// DCP rank r holds global token g, for ALL layers, when (g / I) % W == r. Its local token index
// (the position in its own per-request block table) is (g / (I * W)) * I + g % I, so the tokens
// a rank holds are packed densely and in global order. Its cache is a PagedKvCache over all the
// model's layers with its own block size (it need not equal prefill's).
//
// TP beyond DCP: TP ranks that share a DCP rank hold the same KV bytes (MLA's latent is not
// split over heads; for a K/V-split model each TP rank's head slice is its own "model" here —
// describe it with that slice's bytes per token). A deployment with TP > DCP therefore sends the
// same gather buffer to each replica of DCP rank r; the plan below is per DCP rank.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "connector/paged_kv_layout.h"

// Token arithmetic is shared by the host planner and the CUDA kernels.
#if defined(__CUDACC__)
#define KVPOOL_HOST_DEVICE __host__ __device__
#else
#define KVPOOL_HOST_DEVICE
#endif

namespace kvpool::handoff {

using connector::BlockId;
using connector::KvLayoutKind;
using connector::PagedKvCache;
using connector::PagedKvLayout;

// Which decode (DCP) rank holds a global token, and where in that rank's local order.
// Invariant for every rank r: Global(r, Local(g)) == g for every g with Owner(g) == r, and
// Local is strictly increasing over the tokens r owns (so a range of global tokens maps to a
// contiguous range of local tokens on every rank).
struct DcpTokenMap {
  uint32_t ranks = 1;       // W > 0
  uint32_t interleave = 1;  // I > 0

  KVPOOL_HOST_DEVICE uint64_t span() const { return uint64_t{ranks} * interleave; }
  KVPOOL_HOST_DEVICE uint32_t Owner(uint64_t g) const { return static_cast<uint32_t>((g / interleave) % ranks); }
  KVPOOL_HOST_DEVICE uint64_t Local(uint64_t g) const { return (g / span()) * interleave + g % interleave; }
  KVPOOL_HOST_DEVICE uint64_t Global(uint32_t rank, uint64_t local) const {
    return (local / interleave) * span() + uint64_t{rank} * interleave + local % interleave;
  }
  // Number of tokens in [0, end) that `rank` holds; equals Local of the first such token >= end.
  KVPOOL_HOST_DEVICE uint64_t CountBelow(uint32_t rank, uint64_t end) const {
    const uint64_t full = (end / span()) * interleave;
    const uint64_t rest = end % span();
    const uint64_t lo = uint64_t{rank} * interleave;
    return full + (rest > lo ? (rest - lo < interleave ? rest - lo : interleave) : 0);
  }
};

// The prefill side: PP ranks, each a contiguous layer range.
struct PrefillLayout {
  KvLayoutKind kind = KvLayoutKind::kLatent;
  std::vector<uint32_t> stage_layers;      // layers of PP rank p, in rank order (e.g. 20/20/20/18)
  uint32_t bytes_per_token_per_layer = 0;  // K+V together for kSplitKv
  uint32_t block_tokens = 16;

  uint32_t num_ranks() const { return static_cast<uint32_t>(stage_layers.size()); }
  uint32_t total_layers() const;
  // Global index of rank p's first layer. REQUIRES: p < num_ranks().
  uint32_t first_layer(uint32_t p) const;
  // The layout rank p's PagedKvCache must have (dense; a cache may still set a block stride).
  PagedKvLayout RankLayout(uint32_t p) const;

  Status Validate() const;
};

// The decode side: W DCP ranks, each holding every layer for its tokens.
struct DecodeLayout {
  KvLayoutKind kind = KvLayoutKind::kLatent;
  uint32_t num_layers = 0;  // all the model's layers
  uint32_t bytes_per_token_per_layer = 0;
  uint32_t block_tokens = 16;
  uint32_t dcp_ranks = 1;   // W
  uint32_t interleave = 1;  // I

  DcpTokenMap token_map() const { return {dcp_ranks, interleave}; }
  // The layout every decode rank's PagedKvCache must have.
  PagedKvLayout RankLayout() const;

  Status Validate() const;
};

// Both sides valid and compatible: same kind, same bytes per token-layer, and prefill's layer
// split covers exactly the decode model's layers.
Status ValidateHandoffLayouts(const PrefillLayout& prefill, const DecodeLayout& decode);

}  // namespace kvpool::handoff
