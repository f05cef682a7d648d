// Without KVPOOL_CUDA: the replay has no device caches and no GPU handoff (`kvpool replay
// --gpu` reports this instead of running).
#include "engine/device_kv_cache.h"
#include "engine/kv_handoff.h"

namespace kvpool::engine {

Result<std::unique_ptr<KvCacheMemory>> NewDeviceKvCacheMemory(const connector::PagedKvLayout&, uint64_t, int) {
  return Unavailable("this kvpool was built without CUDA (configure with -DKVPOOL_CUDA=ON for --gpu)");
}

int CudaDeviceCount() { return 0; }

Result<std::unique_ptr<KvHandoff>> NewGpuKvHandoff(uint64_t) {
  return Unavailable("this kvpool was built without CUDA (configure with -DKVPOOL_CUDA=ON for --gpu)");
}

}  // namespace kvpool::engine
