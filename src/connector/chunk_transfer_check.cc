#include <fmt/format.h>

#include "connector/chunk_packing.h"

namespace kvpool::connector {

Status CheckChunkTransfer(const ChunkTransfer& t) {
  if (t.cache == nullptr) return InvalidArgument("chunk transfer: no cache");
  KVPOOL_RETURN_IF_ERROR(t.cache->Validate());
  const PagedKvLayout& layout = t.cache->layout;
  if (t.chunk_tokens == 0 || t.chunk_tokens % layout.block_tokens != 0) {
    return InvalidArgument(fmt::format("chunk transfer: chunk_tokens {} is not a multiple of block_tokens {}",
                                       t.chunk_tokens, layout.block_tokens));
  }
  if (t.num_chunks == 0) return Status::Ok();
  if (t.staging == nullptr) return InvalidArgument("chunk transfer: no staging buffer");
  const uint64_t blocks_per_chunk = t.chunk_tokens / layout.block_tokens;
  const uint64_t first_block = t.first_chunk * blocks_per_chunk;
  const uint64_t end_block = (t.first_chunk + t.num_chunks) * blocks_per_chunk;
  if (end_block > t.block_table.size()) {
    return InvalidArgument(fmt::format("chunk transfer: chunks [{}, {}) need {} blocks, block table has {}",
                                       t.first_chunk, t.first_chunk + t.num_chunks, end_block, t.block_table.size()));
  }
  for (uint64_t b = first_block; b < end_block; ++b) {
    const BlockId id = t.block_table[b];
    if (id < 0 || static_cast<uint64_t>(id) >= t.cache->num_blocks) {
      return InvalidArgument(fmt::format("chunk transfer: block table entry {} is block {}, cache has {} blocks", b,
                                         id, t.cache->num_blocks));
    }
  }
  return Status::Ok();
}

}  // namespace kvpool::connector
