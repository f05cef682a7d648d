// Raw memory behind a Python object, so numpy arrays, bytes-likes and torch tensors (CPU or
// CUDA) can be handed to the pool and the connector without copies.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace kvpool::python {

struct RawBuffer {
  std::byte* data = nullptr;
  size_t bytes = 0;
  int cuda_device = -1;  // >= 0 when the object says it lives on that CUDA device
};

// Accepts, in this order: objects with data_ptr() (torch tensors: numel * element_size
// bytes, device from .device), objects with __cuda_array_interface__ (contiguous only), and
// the buffer protocol (contiguous; writable when `writable`). Throws ValueError/TypeError.
RawBuffer ResolveBuffer(const pybind11::object& obj, bool writable);

}  // namespace kvpool::python
