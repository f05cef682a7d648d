// KvCacheMemory: the memory of one paged KV cache of the emulated deployment — one prefill
// stage's or one decode instance's — in host memory (the default, standing in for the GPU) or
// in a CUDA device's memory (`kvpool replay --gpu`), together with the emulated model's
// forward pass over it: writing the deterministic KV of computed tokens and counting entries
// that differ from it (kv_pattern.h). On a device both run as kernels on the cache's GPU and
// return once finished, so whatever reads the cache next (a packer, the handoff) sees them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "connector/paged_kv_layout.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {

class KvCacheMemory {
 public:
  virtual ~KvCacheMemory() = default;
  // Plane bases are host or device addresses (see cuda_device()).
  virtual const connector::PagedKvCache& cache() const = 0;
  // -1: host memory.
  virtual int cuda_device() const = 0;
  // WriteKv / CountKvMismatches of kv_pattern.h on this cache. Only a failing device (a CUDA
  // error) makes them fail; the KV is then not what it should be.
  virtual Status WriteKv(std::span<const connector::BlockId> block_table, uint32_t first_layer,
                         std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end) = 0;
  virtual Result<uint64_t> CountKvMismatches(std::span<const connector::BlockId> block_table, uint32_t first_layer,
                                             std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end,
                                             const CacheTokens& tokens) = 0;
};

// CountKvMismatches, with a failure to check (a CUDA error, logged) counted as one mismatch: a
// replay must never report bytes as verified that it could not read.
uint64_t CountKvMismatchesOrOne(KvCacheMemory& memory, std::span<const connector::BlockId> block_table,
                                uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin,
                                uint64_t end, const CacheTokens& tokens = {});

// Zero-filled planes of `num_blocks` blocks each, in host memory (cuda_device < 0) or on that
// device. UNAVAILABLE for a device when kvpool was built without KVPOOL_CUDA or the device is
// missing; RESOURCE_EXHAUSTED when it has no room. REQUIRES: layout.Validate().ok().
Result<std::unique_ptr<KvCacheMemory>> NewKvCacheMemory(const connector::PagedKvLayout& layout, uint64_t num_blocks,
                                                        int cuda_device);

// CUDA devices the replay can place caches on (0 without KVPOOL_CUDA or a driver).
int CudaDeviceCount();

}  // namespace kvpool::engine
