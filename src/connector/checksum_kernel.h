// Checksum() (xxh3-64, common/checksum.h) of objects already in device memory, computed by the
// GPU (KVPOOL_CUDA only): the CUDA packer hashes what it copied into its device bounce buffer,
// so the restore's check reads no byte from host memory a second time.
//
// Two kernels on the caller's stream (xxh3_steps.h): one thread per (object, 1 KiB block, lane)
// sums what the block adds to the lane, then eight threads per object chain the lanes'
// scrambles and merge them. The chain is sequential: ~1 µs per 64 KiB of an object.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kvpool::connector {

// Device scratch (bytes) HashObjectsOnDevice needs for `objects` objects of `object_bytes`:
// 1/16 of their size, plus a little.
uint64_t DeviceHashScratchBytes(uint64_t object_bytes, uint64_t objects);

// out[i] = Checksum(base + i * object_bytes, object_bytes) for every i < objects, queued on
// `stream` (valid once it has run). `base` is device memory; `out` device memory or mapped
// pinned host memory; `scratch` device memory of DeviceHashScratchBytes. Returns the launch's
// error, if any.
cudaError_t HashObjectsOnDevice(const std::byte* base, uint64_t object_bytes, uint64_t objects, uint64_t* scratch,
                                uint64_t* out, cudaStream_t stream);

}  // namespace kvpool::connector
