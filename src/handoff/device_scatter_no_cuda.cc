// Built when KVPOOL_CUDA is OFF: decode caches in device memory are reported unavailable.
#include "handoff/device_scatter.h"

namespace kvpool::handoff {

struct DeviceScatter::Impl {};

DeviceScatter::DeviceScatter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceScatter::~DeviceScatter() = default;

Result<std::unique_ptr<DeviceScatter>> DeviceScatter::Create(int device, uint64_t, uint32_t) {
  return Unavailable("kvpool was built without KVPOOL_CUDA: no decode cache on CUDA device " +
                     std::to_string(device) + " (use a host-memory cache, cuda_device -1)");
}
int DeviceScatter::device() const { return -1; }
Status DeviceScatter::ScatterPiece(const PairPlan&, const HandoffWrite&, const std::byte*, const DeviceKvTable&) {
  return Unavailable("kvpool was built without KVPOOL_CUDA");
}

Result<std::unique_ptr<PinnedHostRange>> PinnedHostRange::Register(void*, uint64_t) {
  return Unavailable("kvpool was built without KVPOOL_CUDA: no host memory registration");
}
PinnedHostRange::~PinnedHostRange() = default;

}  // namespace kvpool::handoff
