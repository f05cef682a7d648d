// DeviceGather with CUDA (KVPOOL_CUDA). No fmt here: nvcc rejects its consteval format strings.
#include <cuda_runtime.h>

#include <string>

#include "handoff/cuda_status.h"
#include "handoff/device_gather.h"

namespace kvpool::handoff {

struct DeviceGather::Impl {
  int device = 0;
  uint64_t slot_bytes = 0;
  cudaStream_t stream = nullptr;
  std::byte* staging = nullptr;  // device
  std::byte* host = nullptr;     // page-locked

  ~Impl() {
    cudaSetDevice(device);
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    if (staging) cudaFree(staging);
    if (host) cudaFreeHost(host);
  }
};

DeviceGather::DeviceGather(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGather::~DeviceGather() = default;

Result<std::unique_ptr<DeviceGather>> DeviceGather::Create(int device, uint64_t slot_bytes) {
  if (slot_bytes == 0) return InvalidArgument("device gather: slot_bytes is 0");
  KVPOOL_RETURN_IF_ERROR(CheckCudaDevice(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->slot_bytes = slot_bytes;
  HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
  HANDOFF_CUDA_RETURN(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), "stream create");
  void* p = nullptr;
  HANDOFF_CUDA_RETURN(cudaMalloc(&p, slot_bytes), "malloc staging");
  impl->staging = static_cast<std::byte*>(p);
  HANDOFF_CUDA_RETURN(cudaHostAlloc(&p, slot_bytes, cudaHostAllocPortable), "pinned host piece");
  impl->host = static_cast<std::byte*>(p);
  return std::unique_ptr<DeviceGather>(new DeviceGather(std::move(impl)));
}

int DeviceGather::device() const { return impl_->device; }
std::byte* DeviceGather::host_piece() const { return impl_->host; }

Status DeviceGather::GatherPiece(const PairPlan& pair, const HandoffWrite& piece, const DeviceKvTable& prefill) {
  Impl& m = *impl_;
  if (prefill.device() != m.device) {
    return InvalidArgument("device gather: the cache is on GPU " + std::to_string(prefill.device()) +
                           ", this gather runs on GPU " + std::to_string(m.device));
  }
  if (piece.length > m.slot_bytes) {
    return InvalidArgument("device gather: a " + std::to_string(piece.length) + " B piece exceeds the " +
                           std::to_string(m.slot_bytes) + " B slot");
  }
  KVPOOL_RETURN_IF_ERROR(GatherCuda(pair, prefill, m.staging, m.stream, &piece));
  HANDOFF_CUDA_RETURN(cudaMemcpyAsync(m.host, m.staging, piece.length, cudaMemcpyDeviceToHost, m.stream),
                            "copy piece to host");
  HANDOFF_CUDA_RETURN(cudaStreamSynchronize(m.stream), "gather of a piece");
  return Status::Ok();
}

}  // namespace kvpool::handoff
