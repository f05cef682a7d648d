// What the GPU benchmarks share: bench_checks.h and an abort-on-error check for CUDA calls.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "bench_checks.h"

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t _e = (x);                                                                     \
    if (_e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(_e)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)
