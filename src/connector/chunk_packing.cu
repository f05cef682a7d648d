// The CUDA packer (KVPOOL_CUDA): one thread block per (chunk, plane, cache block) run of
// contiguous tokens, copying it between the paged cache and a packed staging area with the
// widest loads the alignment allows (16 B when every base, stride and size is a multiple of
// 16). Staging in host memory (pinned, from StagingBuffer) is bounced through a device buffer
// with cudaMemcpyAsync on the same stream, so the PCIe leg runs on the copy engine. An unpack
// that asks for checksums hashes the objects in device memory after they were copied
// (checksum_kernel.h). Links cudart only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "connector/checksum_kernel.h"
#include "connector/chunk_packing.h"

namespace kvpool::connector {
namespace {

struct CopyArgs {
  std::byte* const* plane_bases;  // device array, one per plane
  const BlockId* blocks;          // device: block ids of the chunks being copied, in order
  std::byte* staging;             // device address of the first chunk's packed object
  uint64_t block_stride;
  uint64_t object_bytes;
  uint64_t first_token;  // sequence token of the first chunk's first token
  uint64_t keep_below;   // unpack: tokens below this are left alone
  uint64_t segments;     // num_chunks * planes * blocks_per_chunk
  uint32_t token_bytes;
  uint32_t block_tokens;
  uint32_t blocks_per_chunk;
  uint32_t planes;
  uint32_t chunk_tokens;
};

template <bool kPack, typename V>
__global__ void CopyRuns(CopyArgs a) {
  const uint64_t seg = blockIdx.x;
  if (seg >= a.segments) return;
  const uint32_t b = seg % a.blocks_per_chunk;
  const uint64_t rest = seg / a.blocks_per_chunk;
  const uint32_t plane = rest % a.planes;
  const uint64_t chunk = rest / a.planes;
  const uint64_t token0 = a.first_token + chunk * a.chunk_tokens + uint64_t{b} * a.block_tokens;
  uint32_t skip = 0;
  if (!kPack && a.keep_below > token0) {
    if (a.keep_below >= token0 + a.block_tokens) return;
    skip = static_cast<uint32_t>(a.keep_below - token0);
  }
  const BlockId block = a.blocks[chunk * a.blocks_per_chunk + b];
  std::byte* cached = a.plane_bases[plane] + static_cast<uint64_t>(block) * a.block_stride + uint64_t{skip} * a.token_bytes;
  std::byte* packed = a.staging + chunk * a.object_bytes +
                      (uint64_t{plane} * a.chunk_tokens + uint64_t{b} * a.block_tokens + skip) * a.token_bytes;
  const V* src = reinterpret_cast<const V*>(kPack ? cached : packed);
  V* dst = reinterpret_cast<V*>(kPack ? packed : cached);
  const uint32_t n = (a.block_tokens - skip) * a.token_bytes / sizeof(V);
#pragma unroll 4
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

template <bool kPack>
void Launch(const CopyArgs& a, uint64_t align, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned grid = static_cast<unsigned>(a.segments);
  if (align % 16 == 0) {
    CopyRuns<kPack, uint4><<<grid, kThreads, 0, stream>>>(a);
  } else if (align % 8 == 0) {
    CopyRuns<kPack, uint2><<<grid, kThreads, 0, stream>>>(a);
  } else if (align % 4 == 0) {
    CopyRuns<kPack, uint32_t><<<grid, kThreads, 0, stream>>>(a);
  } else {
    CopyRuns<kPack, uint8_t><<<grid, kThreads, 0, stream>>>(a);
  }
}

Status CudaError(cudaError_t e, const char* what) {
  // No fmt in device-compiled files: nvcc rejects its consteval format strings.
  return Internal(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

// A device allocation that grows on demand.
class DeviceScratch {
 public:
  ~DeviceScratch() {
    if (ptr_) cudaFree(ptr_);
  }
  cudaError_t Reserve(size_t bytes) {
    if (bytes <= size_) return cudaSuccess;
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e == cudaSuccess) size_ = bytes;
    return e;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

class CudaChunkPacker final : public ChunkPacker {
 public:
  static constexpr uint64_t kBounceBytes = uint64_t{64} << 20;
  // Checksums queued and not yet handed out by Wait(); more first waits for these.
  static constexpr uint64_t kMaxPendingChecksums = 4096;

  explicit CudaChunkPacker(int device) : device_(device), name_("cuda:" + std::to_string(device)) {}
  ~CudaChunkPacker() override {
    cudaSetDevice(device_);
    for (cudaStream_t s : {stream_, hash_stream_}) {
      if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      }
    }
    for (const HashInFlight& h : hashing_) cudaEventDestroy(h.done);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    if (checksums_) cudaFreeHost(checksums_);
  }
  Status Init() {
    cudaError_t e = cudaSetDevice(device_);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&hash_stream_, cudaStreamNonBlocking);
    return e == cudaSuccess ? Status::Ok() : CudaError(e, "stream create");
  }

  Status Pack(const ChunkTransfer& t) override { return Copy(t, true); }
  Status Unpack(const ChunkTransfer& t) override { return Copy(t, false); }
  Status Wait() override {
    cudaSetDevice(device_);
    cudaError_t e = cudaStreamSynchronize(stream_);  // kernel faults surface here too
    if (const cudaError_t h = cudaStreamSynchronize(hash_stream_); e == cudaSuccess) e = h;
    if (e == cudaSuccess) {
      for (size_t i = 0; i < checksum_destinations_.size(); ++i) *checksum_destinations_[i] = checksums_[i];
    }
    checksum_destinations_.clear();
    for (const HashInFlight& h : hashing_) free_events_.push_back(h.done);
    hashing_.clear();
    return e == cudaSuccess ? Status::Ok() : CudaError(e, "stream synchronize");
  }
  bool HashesObjects() const override { return true; }
  const char* name() const override { return name_.c_str(); }

 private:
  Status Copy(const ChunkTransfer& t, bool pack) {
    KVPOOL_RETURN_IF_ERROR(CheckChunkTransfer(t));
    if (t.num_chunks == 0) return Status::Ok();
    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return CudaError(e, "set device");
    const PagedKvLayout& layout = t.cache->layout;
    const uint64_t object_bytes = layout.packed_chunk_bytes(t.chunk_tokens);
    const uint32_t blocks_per_chunk = t.chunk_tokens / layout.block_tokens;

    // Plane bases and the block ids of these chunks go to the device on the stream, so they
    // are in place before the kernel reads them and not overwritten before it has.
    const size_t planes_bytes = t.cache->plane_bases.size() * sizeof(std::byte*);
    const size_t blocks_bytes = t.num_chunks * blocks_per_chunk * sizeof(BlockId);
    if ((e = planes_.Reserve(planes_bytes)) != cudaSuccess) return CudaError(e, "malloc");
    if ((e = blocks_.Reserve(blocks_bytes)) != cudaSuccess) return CudaError(e, "malloc");
    if ((e = cudaMemcpyAsync(planes_.as<void>(), t.cache->plane_bases.data(), planes_bytes, cudaMemcpyHostToDevice,
                             stream_)) != cudaSuccess) {
      return CudaError(e, "copy plane bases");
    }
    if ((e = cudaMemcpyAsync(blocks_.as<void>(), t.block_table.data() + t.first_chunk * blocks_per_chunk, blocks_bytes,
                             cudaMemcpyHostToDevice, stream_)) != cudaSuccess) {
      return CudaError(e, "copy block table");
    }

    CopyArgs a{};
    a.plane_bases = planes_.as<std::byte*>();
    a.block_stride = layout.block_stride();
    a.object_bytes = object_bytes;
    a.keep_below = pack ? 0 : t.keep_tokens_below;
    a.token_bytes = layout.plane_token_bytes();
    a.block_tokens = layout.block_tokens;
    a.blocks_per_chunk = blocks_per_chunk;
    a.planes = layout.num_planes();
    a.chunk_tokens = t.chunk_tokens;
    uint64_t align = a.token_bytes | a.block_stride | object_bytes;
    for (std::byte* p : t.cache->plane_bases) align |= reinterpret_cast<uintptr_t>(p);
    align = align & (~align + 1);  // lowest set bit: the largest power of two dividing all

    cudaPointerAttributes attr{};
    e = cudaPointerGetAttributes(&attr, t.staging);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not a CUDA pointer at all: plain host memory
      attr.type = cudaMemoryTypeUnregistered;
    }
    const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    const uint64_t piece_chunks =
        on_device ? t.num_chunks : std::max<uint64_t>(1, kBounceBytes / object_bytes);
    if (!on_device && (e = bounce_.Reserve(piece_chunks * object_bytes)) != cudaSuccess) {
      return CudaError(e, "malloc bounce buffer");
    }
    const bool hashed = !pack && t.checksums;
    for (uint64_t c = 0; c < t.num_chunks; c += piece_chunks) {
      const uint64_t n = std::min(piece_chunks, t.num_chunks - c);
      std::byte* host = t.staging + c * object_bytes;
      if (on_device) {
        a.staging = host;
      } else {
        Result<std::byte*> bounce = BounceFor(n * object_bytes, hashed);
        if (!bounce.ok()) return bounce.status();
        a.staging = bounce.value();
      }
      a.blocks = blocks_.as<BlockId>() + c * blocks_per_chunk;
      a.first_token = (t.first_chunk + c) * t.chunk_tokens;
      a.segments = n * a.planes * blocks_per_chunk;
      const uint64_t a_align = align | (reinterpret_cast<uintptr_t>(a.staging) & 15);
      const uint64_t lowest = a_align & (~a_align + 1);
      if (!pack && !on_device) {
        e = cudaMemcpyAsync(a.staging, host, n * object_bytes, cudaMemcpyHostToDevice, stream_);
        if (e != cudaSuccess) return CudaError(e, "copy staging to device");
      }
      if (pack) {
        Launch<true>(a, lowest, stream_);
      } else {
        Launch<false>(a, lowest, stream_);
      }
      if ((e = cudaGetLastError()) != cudaSuccess) return CudaError(e, "kernel launch");
      if (hashed) KVPOOL_RETURN_IF_ERROR(HashPiece(a.staging, object_bytes, n, t.checksums + c, !on_device));
      if (pack && !on_device) {
        e = cudaMemcpyAsync(host, a.staging, n * object_bytes, cudaMemcpyDeviceToHost, stream_);
        if (e != cudaSuccess) return CudaError(e, "copy staging to host");
      }
    }
    return Status::Ok();
  }

  // Where a piece of `bytes` goes in the bounce buffer. Unhashed pieces all go to its start:
  // the stream orders them. Hashed ones go round it, so one piece is hashed on hash_stream_
  // while the next is copied in; a piece waits only for hashes still reading the bytes it
  // will overwrite. Starts stay 256-byte aligned, so the copy kernel keeps its widest loads.
  Result<std::byte*> BounceFor(uint64_t bytes, bool hashed) {
    uint64_t begin = 0;
    if (hashed) {
      if (ring_next_ + bytes > bounce_.size()) ring_next_ = 0;
      begin = ring_next_;
      ring_next_ = (begin + bytes + 255) / 256 * 256;
    }
    const uint64_t end = begin + bytes;
    for (auto it = hashing_.begin(); it != hashing_.end();) {
      if (it->begin >= end || begin >= it->end) {
        ++it;
        continue;
      }
      if (cudaError_t e = cudaStreamWaitEvent(stream_, it->done); e != cudaSuccess) return CudaError(e, "wait event");
      free_events_.push_back(it->done);
      it = hashing_.erase(it);
    }
    return bounce_.as<std::byte>() + begin;
  }

  Result<cudaEvent_t> TakeEvent() {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else if (cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); err != cudaSuccess) {
      return CudaError(err, "event create");
    }
    return e;
  }

  // Queues, on hash_stream_ once stream_ has copied them in, the hash of n objects at `device`
  // (device memory; `in_bounce`: a part of the bounce buffer, freed for reuse when hashed).
  // Their checksums go to out[0, n) at the next Wait(); the kernel writes them into pinned host
  // memory the GPU maps.
  Status HashPiece(const std::byte* device, uint64_t object_bytes, uint64_t n, uint64_t* out, bool in_bounce) {
    if (n > kMaxPendingChecksums) return InvalidArgument("too many chunks in one unpack piece to hash");
    if (checksum_destinations_.size() + n > kMaxPendingChecksums) KVPOOL_RETURN_IF_ERROR(Wait());
    cudaError_t e = cudaSuccess;
    if (!checksums_ && (e = cudaHostAlloc(&checksums_, kMaxPendingChecksums * sizeof(uint64_t),
                                          cudaHostAllocMapped | cudaHostAllocPortable)) != cudaSuccess) {
      checksums_ = nullptr;
      return CudaError(e, "allocate checksum slots");
    }
    if ((e = hash_scratch_.Reserve(DeviceHashScratchBytes(object_bytes, n))) != cudaSuccess) {
      return CudaError(e, "malloc hash scratch");
    }
    Result<cudaEvent_t> copied = TakeEvent();
    if (!copied.ok()) return copied.status();
    if ((e = cudaEventRecord(*copied, stream_)) == cudaSuccess) e = cudaStreamWaitEvent(hash_stream_, *copied);
    free_events_.push_back(*copied);  // the wait holds the state it saw: reusable at once
    if (e != cudaSuccess) return CudaError(e, "order the hash after the copy");
    e = HashObjectsOnDevice(device, object_bytes, n, hash_scratch_.as<uint64_t>(),
                            checksums_ + checksum_destinations_.size(), hash_stream_);
    if (e != cudaSuccess) return CudaError(e, "hash kernel launch");
    for (uint64_t i = 0; i < n; ++i) checksum_destinations_.push_back(out + i);
    if (in_bounce) {
      Result<cudaEvent_t> hashed = TakeEvent();
      if (!hashed.ok()) return hashed.status();
      const uint64_t begin = device - bounce_.as<std::byte>();
      hashing_.push_back({begin, begin + n * object_bytes, *hashed});
      if ((e = cudaEventRecord(*hashed, hash_stream_)) != cudaSuccess) return CudaError(e, "event record");
    }
    return Status::Ok();
  }

  const int device_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t hash_stream_ = nullptr;  // hashes what stream_ copied in, beside the next copy
  DeviceScratch planes_, blocks_, bounce_, hash_scratch_;
  struct HashInFlight {
    uint64_t begin, end;  // bytes of the bounce buffer being hashed
    cudaEvent_t done;     // recorded on hash_stream_ after the hash
  };
  std::deque<HashInFlight> hashing_;  // since the last Wait()
  uint64_t ring_next_ = 0;            // where the next hashed piece goes in the bounce buffer
  std::vector<cudaEvent_t> free_events_;
  uint64_t* checksums_ = nullptr;                    // pinned, mapped: kMaxPendingChecksums slots
  std::vector<uint64_t*> checksum_destinations_;  // slot i goes to *checksum_destinations_[i]
};

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

Result<std::unique_ptr<ChunkPacker>> NewCudaChunkPacker(int device) {
  const int n = CudaDeviceCount();
  if (device < 0 || device >= n) {
    return Unavailable("no CUDA device " + std::to_string(device) + " (" + std::to_string(n) + " present)");
  }
  auto packer = std::make_unique<CudaChunkPacker>(device);
  KVPOOL_RETURN_IF_ERROR(packer->Init());
  return std::unique_ptr<ChunkPacker>(std::move(packer));
}

}  // namespace kvpool::connector
