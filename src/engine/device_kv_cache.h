// The device-memory KvCacheMemory (kv_cache_memory.h): device_kv_cache.cu with KVPOOL_CUDA,
// otherwise replay_no_cuda.cc, whose functions return UNAVAILABLE / 0 devices.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "engine/kv_cache_memory.h"

namespace kvpool::engine {

Result<std::unique_ptr<KvCacheMemory>> NewDeviceKvCacheMemory(const connector::PagedKvLayout& layout,
                                                              uint64_t num_blocks, int cuda_device);

}  // namespace kvpool::engine
