// Built when KVPOOL_CUDA is OFF: the GPU handoff is reported unavailable; callers use the CPU
// path (handoff_copy.h).
#include "handoff/handoff_copy_cuda.h"

namespace kvpool::handoff {
namespace {

Status NoCuda() { return Unavailable("kvpool was built without KVPOOL_CUDA: no GPU handoff (use the CPU path)"); }

}  // namespace

Result<std::unique_ptr<DeviceKvTable>> DeviceKvTable::Upload(const PagedKvCache&, std::span<const BlockId>, int) {
  return NoCuda();
}
Status DeviceKvTable::Reload(const PagedKvCache&, std::span<const BlockId>) { return NoCuda(); }
DeviceKvTable::~DeviceKvTable() = default;

Status GatherCuda(const PairPlan&, const DeviceKvTable&, std::byte*, CUstream_st*, const HandoffWrite*) {
  return NoCuda();
}
Status ScatterCuda(const PairPlan&, const std::byte*, const DeviceKvTable&, CUstream_st*, const HandoffWrite*) {
  return NoCuda();
}

struct HandoffPipeline::Impl {};
HandoffPipeline::HandoffPipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HandoffPipeline::~HandoffPipeline() = default;
Result<std::unique_ptr<HandoffPipeline>> HandoffPipeline::Create(int, int, const HandoffPipelineOptions&) {
  return NoCuda();
}
Status HandoffPipeline::Transfer(const HandoffPlan&, uint32_t, const DeviceKvTable&,
                                 std::span<const DeviceKvTable* const>, CUevent_st*) {
  return NoCuda();
}
Status HandoffPipeline::Synchronize() { return NoCuda(); }
bool HandoffPipeline::uses_peer_access() const { return false; }
uint64_t HandoffPipeline::pieces_moved() const { return 0; }

int HandoffCudaDeviceCount() { return 0; }

}  // namespace kvpool::handoff
