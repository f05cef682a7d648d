// DeviceScatter: scatters handoff pieces that landed in host memory into a decode cache on one
// GPU — how HandoffReceiver serves a decode cache in CUDA device memory.
//
// Per piece: one host -> device copy into a bounce slot on the GPU, then ScatterCuda from the
// slot into the cache, both on the slot's own stream, then a wait for that stream. A call
// returns only once the scatter has finished on the GPU, so the caller may at once release the
// host memory the piece came from and count the piece as done.
//
// Bounded memory: `slots` bounce slots of `slot_bytes` on the device, reused. Concurrent callers
// each take a slot, so one piece's copy overlaps another's scatter; when every slot is busy a
// caller waits for one.
//
// PinnedHostRange page-locks memory the pieces land in (cudaHostRegister), so the host -> device
// copies are DMA at full speed; without it they still work, through the driver's staging.
//
// Built with KVPOOL_CUDA (device_scatter.cu); without it every entry point returns UNAVAILABLE
// (device_scatter_no_cuda.cc). This header needs no CUDA toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/handoff_plan.h"

namespace kvpool::handoff {

class DeviceScatter {
 public:
  // UNAVAILABLE without CUDA or without `device`; INVALID_ARGUMENT for 0 slots or slot_bytes.
  static Result<std::unique_ptr<DeviceScatter>> Create(int device, uint64_t slot_bytes, uint32_t slots = 2);
  // REQUIRES: no ScatterPiece call in progress.
  ~DeviceScatter();
  DeviceScatter(const DeviceScatter&) = delete;
  DeviceScatter& operator=(const DeviceScatter&) = delete;

  int device() const;

  // Copies `piece`'s bytes (at `landed`, host memory) to the device and scatters them into
  // `decode`'s cache; returns once that has finished on the GPU, or why it failed (the checks of
  // handoff_copy.h: INVALID_ARGUMENT, nothing written; a CUDA error: INTERNAL). REQUIRES:
  // decode.device() == device(). Thread-safe.
  Status ScatterPiece(const PairPlan& pair, const HandoffWrite& piece, const std::byte* landed,
                      const DeviceKvTable& decode);

  struct Impl;

 private:
  explicit DeviceScatter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Host memory page-locked for every device's copies (cudaHostRegister, portable) while this
// lives. REQUIRES: the memory outlives it.
class PinnedHostRange {
 public:
  // UNAVAILABLE without CUDA; the CUDA error otherwise (e.g. the range is already registered).
  static Result<std::unique_ptr<PinnedHostRange>> Register(void* base, uint64_t bytes);
  ~PinnedHostRange();  // cudaHostUnregister
  PinnedHostRange(const PinnedHostRange&) = delete;
  PinnedHostRange& operator=(const PinnedHostRange&) = delete;

 private:
  explicit PinnedHostRange(void* base) : base_(base) {}
  void* base_;
};

}  // namespace kvpool::handoff
