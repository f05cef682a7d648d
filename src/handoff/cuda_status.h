// CUDA errors as Status, for src/handoff's .cu files (KVPOOL_CUDA builds only). No fmt here:
// nvcc rejects its consteval format strings.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"
#include "handoff/handoff_copy_cuda.h"

namespace kvpool::handoff {

inline Status CudaError(cudaError_t e, const std::string& what) {
  return Internal("CUDA " + what + ": " + cudaGetErrorString(e));
}

// UNAVAILABLE unless `device` is one of the CUDA devices present.
inline Status CheckCudaDevice(int device) {
  const int n = HandoffCudaDeviceCount();
  if (device < 0 || device >= n) {
    return Unavailable("no CUDA device " + std::to_string(device) + " (" + std::to_string(n) + " present)");
  }
  return Status::Ok();
}

}  // namespace kvpool::handoff

// Returns CudaError(expr's error, what) from the calling function when expr fails.
#define HANDOFF_CUDA_RETURN(expr, what)                                   \
  do {                                                                    \
    const cudaError_t _e = (expr);                                        \
    if (_e != cudaSuccess) return ::kvpool::handoff::CudaError(_e, what); \
  } while (0)
