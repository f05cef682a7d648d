#include "connector/mapped_segment_pins.h"

#include <fmt/format.h>

#ifdef KVPOOL_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kvpool::connector {
namespace {

// CUDA takes one registration per address range in a process, and several restore engines
// (one per model, GPU or test) may unpack from one mapping: registrations are counted here,
// process-wide, so the second engine does not fail to register (and fall back to slow
// pageable copies) and the first one's end does not unregister memory the second still reads.
struct ProcessRegistrations {
  std::mutex mu;
  std::unordered_map<const std::byte*, int> holders;  // base address -> pins holding it
};
ProcessRegistrations& Registrations() {
  static auto* registrations = new ProcessRegistrations();  // never destroyed: used from destructors
  return *registrations;
}

}  // namespace

MappedSegmentPins::~MappedSegmentPins() {
#ifdef KVPOOL_WITH_CUDA
  ProcessRegistrations& process = Registrations();
  std::lock_guard<std::mutex> lock(process.mu);
  for (auto& [raw, mapping] : pinned_) {
    const std::byte* base = mapping->bytes().data();
    if (--process.holders[base] > 0) continue;
    process.holders.erase(base);
    (void)cudaHostUnregister(const_cast<std::byte*>(base));
  }
#endif
}

Status MappedSegmentPins::Pin(const std::shared_ptr<const transfer::SegmentMapping>& mapping) {
#ifdef KVPOOL_WITH_CUDA
  std::lock_guard<std::mutex> lock(mu_);
  if (pinned_.count(mapping.get())) return Status::Ok();
  std::span<const std::byte> bytes = mapping->bytes();
  ProcessRegistrations& process = Registrations();
  std::lock_guard<std::mutex> process_lock(process.mu);
  int& holders = process.holders[bytes.data()];
  if (holders == 0) {
    // Registration only pins and maps the pages; the device reads them, never writes.
    cudaError_t e = cudaHostRegister(const_cast<std::byte*>(bytes.data()), bytes.size(), cudaHostRegisterPortable);
    if (e != cudaSuccess) {
      process.holders.erase(bytes.data());
      (void)cudaGetLastError();  // clear it: registration failure is not sticky
      return Unavailable(fmt::format("cannot register a mapped pool segment of {} B with CUDA: {}", bytes.size(),
                                     cudaGetErrorString(e)));
    }
  }
  ++holders;
  pinned_.emplace(mapping.get(), mapping);
#endif
  return Status::Ok();
}

}  // namespace kvpool::connector
