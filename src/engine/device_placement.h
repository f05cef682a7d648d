// DevicePlacement: which CUDA device holds each paged cache of the emulated deployment.
// gpus == 0: every cache in host memory (the default). One GPU: everything on device 0. More:
// the first half of the devices holds the prefill stages (stage s of prefill instance i on
// (i * stages + s) modulo that half), the second half the decode DCP ranks (likewise) — so on a
// 2-GPU machine every handoff crosses from one GPU to the other, and on 8 GPUs one PP4 instance's
// stages sit on GPUs 0-3 and one DCP4 decode instance's ranks on GPUs 4-7, like the published
// server's.
#pragma once

#include <cstdint>

namespace kvpool::engine {

struct DevicePlacement {
  int gpus = 0;

  bool on_device() const { return gpus > 0; }
  // -1: host memory.
  int PrefillStage(int instance, uint32_t stage, uint32_t stages) const {
    if (gpus <= 1) return gpus - 1;
    return static_cast<int>((uint64_t(instance) * stages + stage) % uint64_t(prefill_gpus()));
  }
  int DecodeRank(int instance, uint32_t rank, uint32_t ranks) const {
    if (gpus <= 1) return gpus - 1;
    return prefill_gpus() + static_cast<int>((uint64_t(instance) * ranks + rank) % uint64_t(gpus - prefill_gpus()));
  }

 private:
  int prefill_gpus() const { return gpus / 2; }
};

}  // namespace kvpool::engine
