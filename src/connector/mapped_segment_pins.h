// MappedSegmentPins: lets a GPU's copy engines read pool segments mapped in this process
// (same-host shm) at full speed, so a restore can DMA from the storage service's memory
// straight to the device with no staging copy.
//
// Each mapping is registered with CUDA once per process (cudaHostRegister, portable to every
// device; counted across every MappedSegmentPins, as CUDA refuses a second registration of a
// range) and kept alive while registered: CUDA must never hold a registration of memory that
// was unmapped. A registration lasts until the last pins holding it are destroyed; a mapping
// its store withdrew stays pinned until then (a remount is rare, and the memory is the
// store's anyway).
// Without KVPOOL_CUDA, Pin does nothing. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/status.h"
#include "transfer/transfer_engine.h"

namespace kvpool::connector {

class MappedSegmentPins {
 public:
  MappedSegmentPins() = default;
  ~MappedSegmentPins();  // unregisters every pinned mapping
  MappedSegmentPins(const MappedSegmentPins&) = delete;
  MappedSegmentPins& operator=(const MappedSegmentPins&) = delete;

  // OK once `mapping` is registered for device access (the first call registers it).
  Status Pin(const std::shared_ptr<const transfer::SegmentMapping>& mapping);

 private:
  std::mutex mu_;
  std::unordered_map<const transfer::SegmentMapping*, std::shared_ptr<const transfer::SegmentMapping>> pinned_;
};

}  // namespace kvpool::connector
