// ChunkPacker: moves whole chunks of one sequence between a stage's paged KV cache and a
// contiguous staging area holding packed stage objects (paged_kv_layout.h has both layouts).
//
//   Pack:   cache   -> staging   (save: the staging bytes are then put into the pool)
//   Unpack: staging -> cache     (restore: the staging bytes were read from the pool)
//
// The CPU packer (memcpy) runs everywhere and is the reference in tests. The CUDA packer
// (chunk_packing.cu, built with KVPOOL_CUDA) runs a copy kernel on its own non-blocking stream;
// staging may be device memory or pinned host memory (it is then bounced through a device
// buffer with cudaMemcpyAsync, so the PCIe copy runs at copy-engine speed).
//
// Calls may run asynchronously until Wait(); the caller must keep the cache, block table
// contents it passed and staging untouched until Wait() returns. One packer is used by one
// thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "connector/paged_kv_layout.h"

namespace kvpool::connector {

// Chunks [first_chunk, first_chunk + num_chunks) of one sequence, packed back to back in
// `staging` (num_chunks * layout.packed_chunk_bytes(chunk_tokens) bytes).
struct ChunkTransfer {
  const PagedKvCache* cache = nullptr;
  std::span<const BlockId> block_table;  // the whole sequence's block ids, logical order
  uint32_t chunk_tokens = 256;
  uint64_t first_chunk = 0;
  uint64_t num_chunks = 0;
  // Unpack only: sequence tokens below this are left as they are in the cache (the GPU
  // prefix cache already holds them and other requests may be reading those blocks).
  uint64_t keep_tokens_below = 0;
  std::byte* staging = nullptr;
  // Unpack only, for a packer that HashesObjects(): receives Checksum() of each chunk's packed
  // object as the packer read it (num_chunks values), valid once Wait() has returned OK.
  uint64_t* checksums = nullptr;
};

// INVALID_ARGUMENT unless the cache is valid, chunk_tokens is a multiple of block_tokens,
// the block table covers every chunk and every block id it uses is below cache->num_blocks.
// Both packers call it first: a bad block id must never turn into a write outside the cache.
Status CheckChunkTransfer(const ChunkTransfer& t);

class ChunkPacker {
 public:
  virtual ~ChunkPacker() = default;
  virtual Status Pack(const ChunkTransfer& t) = 0;
  virtual Status Unpack(const ChunkTransfer& t) = 0;
  // Waits for every Pack/Unpack issued so far; returns the first error among them.
  virtual Status Wait() = 0;
  // Whether Unpack can hash the objects it reads (ChunkTransfer::checksums) on its own device,
  // so the caller need not read them again. The CUDA packer can; the CPU packer cannot (a
  // copy that also hashes runs slower than a copy beside a hash on another core).
  virtual bool HashesObjects() const { return false; }
  // "cpu" or "cuda:<device>".
  virtual const char* name() const = 0;
};

std::unique_ptr<ChunkPacker> NewCpuChunkPacker();

// A packer running on CUDA device `device`. UNAVAILABLE when kvpool was built without
// KVPOOL_CUDA or no such device is present.
Result<std::unique_ptr<ChunkPacker>> NewCudaChunkPacker(int device);

// Number of CUDA devices usable by NewCudaChunkPacker (0 without KVPOOL_CUDA or a driver).
int CudaDeviceCount();

}  // namespace kvpool::connector
