#include "connector/staging_buffer.h"

#include <cstdlib>

#include <fmt/format.h>

#ifdef KVPOOL_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kvpool::connector {

Result<std::unique_ptr<StagingBuffer>> StagingBuffer::Allocate(ChunkStore* store, uint64_t bytes, int cuda_device) {
  if (bytes == 0) return InvalidArgument("staging buffer: size 0");
  void* p = nullptr;
  bool pinned = false;
  if (cuda_device >= 0) {
#ifdef KVPOOL_WITH_CUDA
    cudaError_t e = cudaSetDevice(cuda_device);
    if (e == cudaSuccess) e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
      return NoSpace(fmt::format("staging buffer: cudaHostAlloc of {} B for device {}: {}", bytes, cuda_device,
                                 cudaGetErrorString(e)));
    }
    pinned = true;
#else
    return Unavailable("staging buffer: pinned memory needs a KVPOOL_CUDA build");
#endif
  } else {
    const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
    p = std::aligned_alloc(4096, rounded);
    if (p == nullptr) return NoSpace(fmt::format("staging buffer: cannot allocate {} B", bytes));
  }
  std::unique_ptr<StagingBuffer> buffer(new StagingBuffer(store, static_cast<std::byte*>(p), bytes, pinned));
  Status s = store->RegisterBuffer(p, bytes);
  if (!s.ok()) return s;  // the destructor frees; unregistering an unknown buffer is harmless
  return buffer;
}

StagingBuffer::~StagingBuffer() {
  (void)store_->UnregisterBuffer(data_);
#ifdef KVPOOL_WITH_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
    return;
  }
#endif
  std::free(data_);
}

}  // namespace kvpool::connector
