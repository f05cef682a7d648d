// StagingBuffer: a host buffer registered with the pool that chunk reads land in and chunk
// writes leave from, zero-copy (the transfer engine copies straight between it and the
// store's memory). With a GPU it is pinned (cudaHostAlloc), so the copy engines move it to
// and from the device at full PCIe speed; without one it is page-aligned ordinary memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "connector/chunk_store.h"
#include "connector/paged_kv_layout.h"

namespace kvpool::connector {

class StagingBuffer {
 public:
  // cuda_device >= 0: pinned for that device (UNAVAILABLE without KVPOOL_CUDA).
  // REQUIRES: `store` outlives the buffer.
  static Result<std::unique_ptr<StagingBuffer>> Allocate(ChunkStore* store, uint64_t bytes, int cuda_device);
  ~StagingBuffer();  // unregisters and frees
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  StagingBuffer(ChunkStore* store, std::byte* data, uint64_t size, bool pinned)
      : store_(store), data_(data), size_(size), pinned_(pinned) {}
  ChunkStore* store_;
  std::byte* data_;
  uint64_t size_;
  bool pinned_;
};

// One pipeline stage as the engines see it: its paged cache and the device that holds it.
struct StageDevice {
  PagedKvCache cache;
  int cuda_device = -1;  // -1: the cache is host memory, packed by the CPU packer
};

}  // namespace kvpool::connector
