// DeviceGather: gathers handoff pieces from a prefill cache in CUDA device memory into
// page-locked host memory — how HandoffSender sends from a GPU to another process or host
// (device_scatter.h is the decode side's counterpart).
//
// Per piece: GatherCuda into a staging buffer on the GPU, then one device -> host copy into
// host_piece(), both on this gather's stream, then a wait for that stream: a call returns once
// the piece's bytes are in host memory, ready for the transfer engine.
//
// Bounded memory: one staging buffer of `slot_bytes` on the device and one page-locked host
// buffer of the same size, reused for every piece. One caller at a time.
//
// Built with KVPOOL_CUDA (device_gather.cu); without it Create returns UNAVAILABLE
// (device_gather_no_cuda.cc). This header needs no CUDA toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/handoff_plan.h"

namespace kvpool::handoff {

class DeviceGather {
 public:
  // UNAVAILABLE without CUDA or without `device`; INVALID_ARGUMENT for slot_bytes 0.
  static Result<std::unique_ptr<DeviceGather>> Create(int device, uint64_t slot_bytes);
  ~DeviceGather();
  DeviceGather(const DeviceGather&) = delete;
  DeviceGather& operator=(const DeviceGather&) = delete;

  int device() const;
  // Page-locked host memory of slot_bytes where GatherPiece leaves a piece.
  std::byte* host_piece() const;

  // Gathers `piece` of `pair` from `prefill` (a cache on device()) into host_piece(); returns
  // once the bytes are there, or why not (the checks of handoff_copy.h or a piece larger than
  // the slot: INVALID_ARGUMENT, nothing launched; a CUDA error: INTERNAL).
  Status GatherPiece(const PairPlan& pair, const HandoffWrite& piece, const DeviceKvTable& prefill);

  struct Impl;

 private:
  explicit DeviceGather(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvpool::handoff
