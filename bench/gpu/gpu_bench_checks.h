// What the GPU benchmarks share: abort-on-error checks for CUDA calls and kvpool Status
// values (a benchmark that hits an error has nothing to report), and median timing helpers.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/status.h"

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t _e = (x);                                                                     \
    if (_e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(_e)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_OK(x)                                                                           \
  do {                                                                                        \
    ::kvpool::Status _s = (x);                                                                \
    if (!_s.ok()) {                                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, _s.ToString().c_str()); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

namespace kvpool::bench {

inline double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The middle element of `v` (the upper one of two for an even count). REQUIRES: not empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace kvpool::bench
