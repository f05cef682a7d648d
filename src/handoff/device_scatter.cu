// DeviceScatter and PinnedHostRange with CUDA (KVPOOL_CUDA). No fmt here: nvcc rejects its
// consteval format strings.
#include <cuda_runtime.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "handoff/cuda_status.h"
#include "handoff/device_scatter.h"

namespace kvpool::handoff {

// Slot s is bounce[s], used only on streams[s]; a slot is in `free` exactly when no caller
// holds it, and a caller gives it back only after its stream is idle (so the next piece's copy
// cannot overwrite bytes a scatter still reads).
struct DeviceScatter::Impl {
  int device = 0;
  uint64_t slot_bytes = 0;
  std::vector<std::byte*> bounce;
  std::vector<cudaStream_t> streams;

  std::mutex mu;
  std::condition_variable freed;
  std::vector<uint32_t> free;

  ~Impl() {
    cudaSetDevice(device);
    for (cudaStream_t s : streams) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
    for (std::byte* p : bounce) cudaFree(p);
  }

  uint32_t Acquire() {
    std::unique_lock<std::mutex> lock(mu);
    freed.wait(lock, [&] { return !free.empty(); });
    const uint32_t s = free.back();
    free.pop_back();
    return s;
  }
  void Release(uint32_t s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      free.push_back(s);
    }
    freed.notify_one();
  }

  // REQUIRES: slot s held by the caller.
  Status CopyAndScatter(uint32_t s, const PairPlan& pair, const HandoffWrite& piece, const std::byte* landed,
                        const DeviceKvTable& decode) {
    HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
    HANDOFF_CUDA_RETURN(
        cudaMemcpyAsync(bounce[s], landed, piece.length, cudaMemcpyHostToDevice, streams[s]), "copy piece to device");
    const Status enqueued = ScatterCuda(pair, bounce[s], decode, streams[s], &piece);
    // Whatever was enqueued finishes before the slot (and the caller's host bytes) are reused.
    const cudaError_t done = cudaStreamSynchronize(streams[s]);
    if (!enqueued.ok()) return enqueued;
    HANDOFF_CUDA_RETURN(done, "scatter of a landed piece");
    return Status::Ok();
  }
};

DeviceScatter::DeviceScatter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceScatter::~DeviceScatter() = default;

Result<std::unique_ptr<DeviceScatter>> DeviceScatter::Create(int device, uint64_t slot_bytes, uint32_t slots) {
  if (slots == 0 || slot_bytes == 0) return InvalidArgument("device scatter: needs at least one slot of > 0 bytes");
  KVPOOL_RETURN_IF_ERROR(CheckCudaDevice(device));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->slot_bytes = slot_bytes;
  HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
  for (uint32_t s = 0; s < slots; ++s) {
    void* p = nullptr;
    HANDOFF_CUDA_RETURN(cudaMalloc(&p, slot_bytes), "malloc bounce slot");
    impl->bounce.push_back(static_cast<std::byte*>(p));
    cudaStream_t st;
    HANDOFF_CUDA_RETURN(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream create");
    impl->streams.push_back(st);
    impl->free.push_back(s);
  }
  return std::unique_ptr<DeviceScatter>(new DeviceScatter(std::move(impl)));
}

int DeviceScatter::device() const { return impl_->device; }

Status DeviceScatter::ScatterPiece(const PairPlan& pair, const HandoffWrite& piece, const std::byte* landed,
                                   const DeviceKvTable& decode) {
  Impl& m = *impl_;
  if (decode.device() != m.device) {
    return InvalidArgument("device scatter: the cache is on GPU " + std::to_string(decode.device()) +
                           ", this scatter runs on GPU " + std::to_string(m.device));
  }
  if (piece.length > m.slot_bytes) {
    return InvalidArgument("device scatter: a " + std::to_string(piece.length) + " B piece exceeds the " +
                           std::to_string(m.slot_bytes) + " B bounce slots");
  }
  if (piece.length == 0) return Status::Ok();
  const uint32_t s = m.Acquire();
  const Status status = m.CopyAndScatter(s, pair, piece, landed, decode);
  m.Release(s);
  return status;
}

Result<std::unique_ptr<PinnedHostRange>> PinnedHostRange::Register(void* base, uint64_t bytes) {
  const cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so the next call does not report it
    return CudaError(e, "host register of " + std::to_string(bytes) + " B");
  }
  return std::unique_ptr<PinnedHostRange>(new PinnedHostRange(base));
}

PinnedHostRange::~PinnedHostRange() { cudaHostUnregister(base_); }

}  // namespace kvpool::handoff
