// Test-only: a device twin of a testing::HostCache (test_handoff_caches.h) — same layout and
// block count, starting with the same bytes — and the checks the GPU handoff tests share.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handoff/test_handoff_caches.h"

namespace kvpool::handoff::testing {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

struct DeviceCache {
  int device = 0;
  PagedKvCache cache;
  std::vector<void*> allocs;  // one per plane
  ~DeviceCache() {
    cudaSetDevice(device);
    for (void* p : allocs) cudaFree(p);
  }
};

inline void Upload(const HostCache& host, int device, DeviceCache& d) {
  d.device = device;
  d.cache = host.cache();
  d.cache.plane_bases.clear();
  CUDA_OK(cudaSetDevice(device));
  for (const auto& plane : host.planes()) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, plane.size()));
    CUDA_OK(cudaMemcpy(p, plane.data(), plane.size(), cudaMemcpyHostToDevice));
    d.allocs.push_back(p);
    d.cache.plane_bases.push_back(static_cast<std::byte*>(p));
  }
}

// The device planes byte for byte equal to `want` (one vector per plane).
inline void ExpectSame(const std::vector<std::vector<std::byte>>& want, const DeviceCache& d, const std::string& what) {
  CUDA_OK(cudaSetDevice(d.device));
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<std::byte> got(want[i].size());
    CUDA_OK(cudaMemcpy(got.data(), d.allocs[i], got.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(got == want[i]) << what << ": plane " << i << " differs from the CPU reference";
  }
}

}  // namespace kvpool::handoff::testing
