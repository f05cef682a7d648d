#include "connector/mapped_segment_pins.h"

#include <fmt/format.h>

#ifdef KVPOOL_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kvpool::connector {

MappedSegmentPins::~MappedSegmentPins() {
#ifdef KVPOOL_WITH_CUDA
  for (auto& [raw, mapping] : pinned_) {
    (void)cudaHostUnregister(const_cast<std::byte*>(mapping->bytes().data()));
  }
#endif
}

Status MappedSegmentPins::Pin(const std::shared_ptr<const transfer::SegmentMapping>& mapping) {
#ifdef KVPOOL_WITH_CUDA
  std::lock_guard<std::mutex> lock(mu_);
  if (pinned_.count(mapping.get())) return Status::Ok();
  std::span<const std::byte> bytes = mapping->bytes();
  // Registration only pins and maps the pages; the device reads them, never writes.
  cudaError_t e = cudaHostRegister(const_cast<std::byte*>(bytes.data()), bytes.size(), cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: registration failure is not sticky
    return Unavailable(fmt::format("cannot register a mapped pool segment of {} B with CUDA: {}", bytes.size(),
                                   cudaGetErrorString(e)));
  }
  pinned_.emplace(mapping.get(), mapping);
#endif
  return Status::Ok();
}

}  // namespace kvpool::connector
