// Built when KVPOOL_CUDA is OFF: prefill caches in device memory are reported unavailable.
#include "handoff/device_gather.h"

namespace kvpool::handoff {

struct DeviceGather::Impl {};

DeviceGather::DeviceGather(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGather::~DeviceGather() = default;

Result<std::unique_ptr<DeviceGather>> DeviceGather::Create(int device, uint64_t) {
  return Unavailable("kvpool was built without KVPOOL_CUDA: no prefill cache on CUDA device " +
                     std::to_string(device) + " (use a host-memory cache, cuda_device -1)");
}
int DeviceGather::device() const { return -1; }
std::byte* DeviceGather::host_piece() const { return nullptr; }
Status DeviceGather::GatherPiece(const PairPlan&, const HandoffWrite&, const DeviceKvTable&) {
  return Unavailable("kvpool was built without KVPOOL_CUDA");
}

}  // namespace kvpool::handoff
