// The CPU packer: one memcpy per (chunk, layer, plane, block) run of contiguous tokens.
#include <algorithm>
#include <cstring>

#include "connector/chunk_packing.h"

namespace kvpool::connector {
namespace {

enum class Direction { kPack, kUnpack };

void CopyChunks(const ChunkTransfer& t, Direction dir) {
  const PagedKvCache& cache = *t.cache;
  const PagedKvLayout& layout = cache.layout;
  const uint64_t object_bytes = layout.packed_chunk_bytes(t.chunk_tokens);
  const uint32_t token_bytes = layout.plane_token_bytes();
  for (uint64_t c = 0; c < t.num_chunks; ++c) {
    const uint64_t chunk_first_token = (t.first_chunk + c) * t.chunk_tokens;
    std::byte* object = t.staging + c * object_bytes;
    for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < layout.planes_per_layer(); ++plane) {
        for (uint32_t block_start = 0; block_start < t.chunk_tokens; block_start += layout.block_tokens) {
          uint64_t lo = chunk_first_token + block_start;
          const uint64_t hi = lo + layout.block_tokens;
          if (dir == Direction::kUnpack) lo = std::max(lo, t.keep_tokens_below);
          if (lo >= hi) continue;
          std::byte* cached = cache.TokenAddress(t.block_table, layer, plane, lo);
          std::byte* packed =
              object + layout.packed_offset(t.chunk_tokens, layer, plane, static_cast<uint32_t>(lo - chunk_first_token));
          const size_t bytes = (hi - lo) * token_bytes;
          if (dir == Direction::kPack) {
            std::memcpy(packed, cached, bytes);
          } else {
            std::memcpy(cached, packed, bytes);
          }
        }
      }
    }
  }
}

class CpuChunkPacker final : public ChunkPacker {
 public:
  Status Pack(const ChunkTransfer& t) override {
    KVPOOL_RETURN_IF_ERROR(CheckChunkTransfer(t));
    CopyChunks(t, Direction::kPack);
    return Status::Ok();
  }
  Status Unpack(const ChunkTransfer& t) override {
    KVPOOL_RETURN_IF_ERROR(CheckChunkTransfer(t));
    CopyChunks(t, Direction::kUnpack);
    return Status::Ok();
  }
  Status Wait() override { return Status::Ok(); }
  const char* name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<ChunkPacker> NewCpuChunkPacker() { return std::make_unique<CpuChunkPacker>(); }

}  // namespace kvpool::connector
