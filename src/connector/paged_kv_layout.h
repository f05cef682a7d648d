// PagedKvLayout / PagedKvCache: where one pipeline stage keeps a sequence's KV on its device,
// and the packed layout of one stage object in the pool.
//
// Paged cache (what attention reads). Each of the stage's layers has one cache array
// (kLatent, e.g. MLA's 576 B per token) or two (kSplitKv: K and V, half the bytes each); we
// call each such array a *plane*. A plane is a sequence of blocks of block_tokens tokens;
// within a block a token's bytes are contiguous and tokens follow each other:
//
//   addr(layer, plane, token) = plane_base[layer * planes + plane]
//                             + block_table[token / block_tokens] * block_stride
//                             + (token % block_tokens) * plane_token_bytes
//
// block_stride defaults to block_tokens * plane_token_bytes (dense planes); a larger stride
// describes caches that interleave K and V per block (e.g. [num_blocks, 2, block, heads, dim]:
// V's base is K's base + one half-block, stride is two half-blocks).
//
// Packed stage object (what the pool stores, independent of block size and block ids):
//   [layer][plane][token in chunk][plane_token_bytes]  — chunk_tokens * bytes_per_token * layers
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "connector/kv_namespace.h"

namespace kvpool::connector {

using BlockId = int32_t;

struct PagedKvLayout {
  KvLayoutKind kind = KvLayoutKind::kLatent;
  uint32_t num_layers = 0;  // this stage's layers
  uint32_t block_tokens = 16;
  uint32_t bytes_per_token_per_layer = 0;  // K+V together for kSplitKv
  uint64_t block_stride_bytes = 0;         // 0 => dense: block_tokens * plane_token_bytes()

  // The layout `spec` gives pipeline stage `stage` (dense planes).
  static PagedKvLayout ForStage(const KvModelSpec& spec, uint32_t stage);

  uint32_t planes_per_layer() const { return kind == KvLayoutKind::kLatent ? 1 : 2; }
  uint32_t num_planes() const { return num_layers * planes_per_layer(); }
  uint32_t plane_token_bytes() const { return bytes_per_token_per_layer / planes_per_layer(); }
  uint64_t block_bytes() const { return uint64_t{block_tokens} * plane_token_bytes(); }
  uint64_t block_stride() const { return block_stride_bytes ? block_stride_bytes : block_bytes(); }
  // Bytes of one plane holding `num_blocks` blocks.
  uint64_t plane_bytes(uint64_t num_blocks) const { return num_blocks * block_stride(); }

  // Bytes of one packed stage object of `chunk_tokens` tokens.
  uint64_t packed_chunk_bytes(uint32_t chunk_tokens) const {
    return uint64_t{chunk_tokens} * bytes_per_token_per_layer * num_layers;
  }
  // Offset of (layer, plane, token_in_chunk) inside one packed stage object.
  uint64_t packed_offset(uint32_t chunk_tokens, uint32_t layer, uint32_t plane, uint32_t token_in_chunk) const {
    return (uint64_t{layer * planes_per_layer() + plane} * chunk_tokens + token_in_chunk) * plane_token_bytes();
  }

  Status Validate() const;
};

// One stage's cache in memory (host or device addresses; the cache owns nothing).
struct PagedKvCache {
  PagedKvLayout layout;
  // One base per plane, layer-major: kSplitKv gives K0, V0, K1, V1, ...
  std::vector<std::byte*> plane_bases;
  uint64_t num_blocks = 0;  // blocks each plane holds; block ids must be below it

  Status Validate() const;
  // Address of one token's bytes in one plane. REQUIRES: the block table covers `token`.
  std::byte* TokenAddress(std::span<const BlockId> block_table, uint32_t layer, uint32_t plane, uint64_t token) const {
    const uint64_t block = static_cast<uint64_t>(block_table[token / layout.block_tokens]);
    return plane_bases[layer * layout.planes_per_layer() + plane] + block * layout.block_stride() +
           (token % layout.block_tokens) * layout.plane_token_bytes();
  }
};

}  // namespace kvpool::connector
