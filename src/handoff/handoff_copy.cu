// The CUDA handoff (KVPOOL_CUDA): row gather/scatter kernels and the same-host GPU -> GPU
// pipeline. Links cudart only. No fmt here: nvcc rejects its consteval format strings.
//
// Kernel shape: a thread block (launched with exactly kThreads threads) takes kRowsPerBlock
// consecutive buffer rows at a time. First one thread per row computes the row's cache address
// from the plan parameters and the device block table (the only 64-bit divisions, once per row)
// into shared memory; then all threads copy the rows' vectors, thread i taking vector i of the
// group's contiguous buffer span, so buffer accesses are fully coalesced and cache accesses are
// row-contiguous (one row is one token's bytes of one plane).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "handoff/handoff_copy.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/cuda_status.h"

namespace kvpool::handoff {
namespace {

constexpr uint32_t kRowsPerBlock = 16;
constexpr uint32_t kThreads = 128;
// Vectors each thread loads before it stores any: keeps several loads in flight per thread, so
// a piece of a few MiB (one short wave of blocks) is not bound by memory latency.
constexpr uint32_t kBatch = 4;

struct RowCopyArgs {
  std::byte* const* planes;  // device array of the cache's plane bases
  const BlockId* table;      // device block table of the request (global tokens on prefill, local on decode)
  std::byte* buffer;         // where row first_row's bytes are
  uint64_t block_stride;
  uint64_t first_local;
  uint64_t num_tokens;
  uint64_t first_row;
  uint64_t num_rows;
  DcpTokenMap map;
  uint32_t decode_rank;
  uint32_t block_tokens;
  uint32_t plane_offset;  // scatter: first_layer * planes_per_layer (prefill layer 0's decode plane); gather: 0
  uint32_t row_bytes;
};

template <bool kGather, typename V>
__global__ void CopyRowsKernel(RowCopyArgs a) {
  __shared__ V* rows[kRowsPerBlock];
  const uint32_t per_row = a.row_bytes / sizeof(V);
  // Grid-stride over groups of kRowsPerBlock rows (a capped grid takes several groups per block).
  for (uint64_t row0 = uint64_t{blockIdx.x} * kRowsPerBlock; row0 < a.num_rows;
       row0 += uint64_t{gridDim.x} * kRowsPerBlock) {
    const uint32_t here = static_cast<uint32_t>(min(uint64_t{kRowsPerBlock}, a.num_rows - row0));
    if (threadIdx.x < here) {
      const uint64_t r = a.first_row + row0 + threadIdx.x;
      const uint64_t plane = r / a.num_tokens;  // layer_of_p * planes_per_layer + plane
      const uint64_t local = a.first_local + r % a.num_tokens;
      const uint64_t token = kGather ? a.map.Global(a.decode_rank, local) : local;
      const uint64_t block = static_cast<uint64_t>(a.table[token / a.block_tokens]);
      rows[threadIdx.x] = reinterpret_cast<V*>(a.planes[a.plane_offset + plane] + block * a.block_stride +
                                               (token % a.block_tokens) * a.row_bytes);
    }
    __syncthreads();
    const uint32_t total = here * per_row;
    V* buf = reinterpret_cast<V*>(a.buffer + row0 * a.row_bytes);
    for (uint32_t base = threadIdx.x; base < total; base += kBatch * kThreads) {
      V v[kBatch];
#pragma unroll
      for (uint32_t u = 0; u < kBatch; ++u) {
        const uint32_t i = base + u * kThreads;
        if (i < total) {
          const uint32_t row = i / per_row;
          v[u] = kGather ? rows[row][i - row * per_row] : buf[i];
        }
      }
#pragma unroll
      for (uint32_t u = 0; u < kBatch; ++u) {
        const uint32_t i = base + u * kThreads;
        if (i < total) {
          const uint32_t row = i / per_row;
          if constexpr (kGather) {
            buf[i] = v[u];
          } else {
            rows[row][i - row * per_row] = v[u];
          }
        }
      }
    }
    __syncthreads();  // rows[] is rewritten by the next group
  }
}

// max_blocks > 0 caps the grid (the kernel then strides), leaving SMs and memory bandwidth to
// whatever else runs on the GPU (the copy engine, the model).
template <bool kGather>
void LaunchRows(const RowCopyArgs& a, uint32_t align, uint32_t max_blocks, cudaStream_t stream) {
  uint64_t groups = (a.num_rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (max_blocks > 0) groups = std::min<uint64_t>(groups, max_blocks);
  const unsigned grid = static_cast<unsigned>(std::min<uint64_t>(groups, 1u << 30));
  if (align % 16 == 0) {
    CopyRowsKernel<kGather, uint4><<<grid, kThreads, 0, stream>>>(a);
  } else if (align % 8 == 0) {
    CopyRowsKernel<kGather, uint2><<<grid, kThreads, 0, stream>>>(a);
  } else if (align % 4 == 0) {
    CopyRowsKernel<kGather, uint32_t><<<grid, kThreads, 0, stream>>>(a);
  } else {
    CopyRowsKernel<kGather, uint8_t><<<grid, kThreads, 0, stream>>>(a);
  }
}

uint32_t LowestPowerOfTwo(uint64_t x, uint32_t cap) {
  if (x == 0) return cap;
  const uint64_t low = x & (~x + 1);
  return static_cast<uint32_t>(std::min<uint64_t>(low, cap));
}

// Enqueues rows of `pair` between `side`'s cache and `buffer`. REQUIRES: the checks passed.
Status EnqueueRows(bool gather, const PairPlan& pair, const DeviceKvTable& side, std::byte* buffer, cudaStream_t stream,
                   const HandoffWrite* piece, uint32_t max_blocks = 0) {
  RowCopyArgs a{};
  a.planes = side.device_plane_bases();
  a.table = side.device_block_table();
  a.buffer = buffer;
  a.block_stride = side.cache().layout.block_stride();
  a.first_local = pair.first_local;
  a.num_tokens = pair.num_tokens;
  a.first_row = piece ? piece->first_row : 0;
  a.num_rows = piece ? piece->num_rows : pair.num_rows();
  a.map = pair.token_map;
  a.decode_rank = pair.decode_rank;
  a.block_tokens = gather ? pair.prefill_block_tokens : pair.decode_block_tokens;
  a.plane_offset = gather ? 0 : pair.first_layer * pair.planes_per_layer;
  a.row_bytes = pair.plane_token_bytes;
  if (a.num_rows == 0) return Status::Ok();
  const uint32_t align =
      std::min(side.alignment(), LowestPowerOfTwo(reinterpret_cast<uintptr_t>(buffer) | a.row_bytes, 16));
  if (gather) {
    LaunchRows<true>(a, align, max_blocks, stream);
  } else {
    LaunchRows<false>(a, align, max_blocks, stream);
  }
  HANDOFF_CUDA_RETURN(cudaGetLastError(), gather ? "gather kernel launch" : "scatter kernel launch");
  return Status::Ok();
}

}  // namespace

int HandoffCudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// ---- DeviceKvTable ----

Result<std::unique_ptr<DeviceKvTable>> DeviceKvTable::Upload(const PagedKvCache& cache, std::span<const BlockId> table,
                                                             int device) {
  KVPOOL_RETURN_IF_ERROR(CheckCudaDevice(device));
  std::unique_ptr<DeviceKvTable> t(new DeviceKvTable());
  t->device_ = device;
  KVPOOL_RETURN_IF_ERROR(t->Reload(cache, table));
  return Result<std::unique_ptr<DeviceKvTable>>(std::move(t));
}

Status DeviceKvTable::Reload(const PagedKvCache& cache, std::span<const BlockId> table) {
  KVPOOL_RETURN_IF_ERROR(cache.Validate());
  for (size_t b = 0; b < table.size(); ++b) {
    if (table[b] < 0 || static_cast<uint64_t>(table[b]) >= cache.num_blocks) {
      return InvalidArgument("handoff device table: block table entry " + std::to_string(b) + " is block " +
                             std::to_string(table[b]) + ", cache has " + std::to_string(cache.num_blocks) + " blocks");
    }
  }
  HANDOFF_CUDA_RETURN(cudaSetDevice(device_), "set device");
  // The same planes as last time (the usual case: one cache, a new request's table) were checked
  // and are on the device already.
  const bool same_planes = plane_bases_ != nullptr && cache.plane_bases == cache_.plane_bases;
  uint64_t align = uint64_t{16} | cache.layout.block_stride() | cache.layout.plane_token_bytes();
  for (std::byte* base : cache.plane_bases) {
    align |= reinterpret_cast<uintptr_t>(base);
    if (same_planes) continue;
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, base) != cudaSuccess) {
      cudaGetLastError();
      attr.type = cudaMemoryTypeUnregistered;
    }
    const bool usable =
        (attr.type == cudaMemoryTypeDevice && attr.device == device_) || attr.type == cudaMemoryTypeManaged;
    if (!usable) {
      return InvalidArgument("handoff device table: a plane base is not device memory of GPU " +
                             std::to_string(device_));
    }
  }
  // From here on only CUDA calls can fail; until they all succeeded the table describes no cache,
  // so every launch with it fails its checks instead of reading half-updated arrays.
  cache_ = PagedKvCache{};
  table_.clear();
  if (!same_planes) {
    const size_t planes_bytes = cache.plane_bases.size() * sizeof(std::byte*);
    if (cache.plane_bases.size() > plane_capacity_) {
      if (plane_bases_) cudaFree(plane_bases_);
      plane_bases_ = nullptr;
      plane_capacity_ = 0;
      HANDOFF_CUDA_RETURN(cudaMalloc(reinterpret_cast<void**>(&plane_bases_), planes_bytes), "malloc plane bases");
      plane_capacity_ = cache.plane_bases.size();
    }
    HANDOFF_CUDA_RETURN(cudaMemcpy(plane_bases_, cache.plane_bases.data(), planes_bytes, cudaMemcpyHostToDevice),
                        "copy plane bases");
  }
  if (block_table_ == nullptr || table.size() > table_capacity_) {
    if (block_table_) cudaFree(block_table_);
    block_table_ = nullptr;
    table_capacity_ = 0;
    const size_t entries = std::max<size_t>(1, table.size());
    HANDOFF_CUDA_RETURN(cudaMalloc(reinterpret_cast<void**>(&block_table_), entries * sizeof(BlockId)),
                        "malloc block table");
    table_capacity_ = entries;
  }
  if (!table.empty()) {
    HANDOFF_CUDA_RETURN(cudaMemcpy(block_table_, table.data(), table.size() * sizeof(BlockId), cudaMemcpyHostToDevice),
                        "copy block table");
  }
  cache_ = cache;
  table_.assign(table.begin(), table.end());
  alignment_ = LowestPowerOfTwo(align, 16);
  return Status::Ok();
}

DeviceKvTable::~DeviceKvTable() {
  if (device_ >= 0) cudaSetDevice(device_);
  if (plane_bases_) cudaFree(plane_bases_);
  if (block_table_) cudaFree(block_table_);
}

// ---- Gather / scatter ----

Status GatherCuda(const PairPlan& pair, const DeviceKvTable& prefill, std::byte* buffer, CUstream_st* stream,
                  const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(CheckGather(pair, prefill.cache(), prefill.table(), piece));
  if (pair.num_tokens == 0) return Status::Ok();
  if (buffer == nullptr) return InvalidArgument("handoff gather: no buffer");
  HANDOFF_CUDA_RETURN(cudaSetDevice(prefill.device()), "set device");
  return EnqueueRows(true, pair, prefill, buffer, stream, piece);
}

Status ScatterCuda(const PairPlan& pair, const std::byte* buffer, const DeviceKvTable& decode, CUstream_st* stream,
                   const HandoffWrite* piece) {
  KVPOOL_RETURN_IF_ERROR(CheckScatter(pair, decode.cache(), decode.table(), piece));
  if (pair.num_tokens == 0) return Status::Ok();
  if (buffer == nullptr) return InvalidArgument("handoff scatter: no buffer");
  HANDOFF_CUDA_RETURN(cudaSetDevice(decode.device()), "set device");
  // The kernel only reads the buffer on a scatter.
  return EnqueueRows(false, pair, decode, const_cast<std::byte*>(buffer), stream, piece);
}

// ---- HandoffPipeline ----
//
// A request's pieces go through the slots round robin (piece i uses slot i % S) and are
// enqueued in batches (HandoffBatchSizes): per batch, the gathers on the prefill GPU, then one
// copy submission (cudaMemcpyBatchAsync) of all of the batch's pieces, then their scatters on the
// decode GPU. A batch never holds one slot twice (its size is at most S / 2). Per slot s, events
// recorded on the stream named (so each lives on that stream's GPU):
//   gathered[s]   gather stream (prefill GPU), recorded for the batch's last slot only: the
//                 batch's pieces are all in staging
//   moved[s]      peer: copy stream (prefill GPU): staging[s] is free again AND landing[s]
//                 holds the piece (recorded after the whole batch's copy)
//                 bounce: h2d stream (decode GPU): host[s] is free again AND landing[s] holds it
//   staged_out[s] bounce only, copy stream (prefill GPU): staging[s] free, host[s] holds the piece
//   scattered[s]  scatter stream (decode GPU): landing[s] is free again
// A cudaStreamWaitEvent captures the event's latest record at the time of the call. Batches are
// enqueued in order, so "gather waits moved[s]" captures the copy of piece i-S (an earlier
// batch), "copy waits gathered[s]" this batch's gathers, "copy waits scattered[s]" piece i-S's
// scatter, "scatter waits moved[s]" this batch's copy. The scatter stream runs in piece order,
// so one wait for the batch's latest reused slot covers every earlier scatter.
//
// Measured on 2x H200 (bench/gpu/handoff_bench.cc and probes; docs/benchmarks.md):
// - Batches: each copy submission costs the copy engine ~3 us of its own. 12 separately
//   submitted 8 MiB peer copies take 0.88 of one 94 MB copy; the same 12 as one batch 0.97.
// - One copy stream: copies in flight on several streams share the copy engine and each
//   finishes later (12 event-chained pieces with kernels: 305 us on one stream, 328 on three,
//   344 on four).
// - Tried and not faster: pull copies (issued on the decode GPU), the gather kernel storing
//   straight into the peer's landing slot, kernel grid caps, and stream memory operations
//   (cuStreamWriteValue/WaitValue) instead of cross-GPU events.

struct HandoffPipeline::Impl {
  int prefill_device = 0, decode_device = 0;
  bool peer = false;
  HandoffPipelineOptions options;
  cudaStream_t gather_stream = nullptr, scatter_stream = nullptr;
  // Prefill GPU: peer copies, or device -> pinned host copies when bouncing. Decode GPU: pinned
  // host -> device copies when bouncing (else null).
  cudaStream_t copy_stream = nullptr, h2d_stream = nullptr;
  std::vector<std::byte*> staging, landing, host;
  std::vector<cudaEvent_t> gathered, moved, staged_out, scattered;
  uint64_t next_piece = 0;

  ~Impl() {
    // Nothing may still be reading or writing the slots when they are freed.
    cudaSetDevice(prefill_device);
    for (cudaStream_t st : {gather_stream, copy_stream}) {
      if (st) cudaStreamSynchronize(st);
    }
    cudaSetDevice(decode_device);
    for (cudaStream_t st : {h2d_stream, scatter_stream}) {
      if (st) cudaStreamSynchronize(st);
    }
    for (std::vector<cudaEvent_t>* events : {&gathered, &moved, &staged_out, &scattered}) {
      for (cudaEvent_t e : *events) cudaEventDestroy(e);
    }
    for (cudaStream_t st : {gather_stream, copy_stream, h2d_stream, scatter_stream}) {
      if (st) cudaStreamDestroy(st);
    }
    cudaSetDevice(prefill_device);
    for (std::byte* p : staging) cudaFree(p);
    cudaSetDevice(decode_device);
    for (std::byte* p : landing) cudaFree(p);
    for (std::byte* p : host) cudaFreeHost(p);
  }

  static Status NewStream(int device, cudaStream_t& out) {
    HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
    HANDOFF_CUDA_RETURN(cudaStreamCreateWithFlags(&out, cudaStreamNonBlocking), "stream create");
    return Status::Ok();
  }
  static Status NewEvent(int device, std::vector<cudaEvent_t>& out) {
    HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
    cudaEvent_t e;
    HANDOFF_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event create");
    out.push_back(e);
    return Status::Ok();
  }
  static Status NewBuffer(int device, uint64_t bytes, std::vector<std::byte*>& out) {
    HANDOFF_CUDA_RETURN(cudaSetDevice(device), "set device");
    void* p = nullptr;
    HANDOFF_CUDA_RETURN(cudaMalloc(&p, bytes), "malloc slot");
    out.push_back(static_cast<std::byte*>(p));
    return Status::Ok();
  }

  Status Init() {
    // Peer access (or one GPU): one copy engine transfer per piece. Otherwise bounce.
    if (!options.allow_peer) {
      peer = false;  // bounce even on one GPU (tests exercise that path with one GPU too)
    } else if (prefill_device == decode_device) {
      peer = true;
    } else {
      int can = 0, back = 0;
      HANDOFF_CUDA_RETURN(cudaDeviceCanAccessPeer(&can, prefill_device, decode_device), "peer query");
      HANDOFF_CUDA_RETURN(cudaDeviceCanAccessPeer(&back, decode_device, prefill_device), "peer query");
      if (can && back) {
        peer = true;
        for (auto [from, to] : {std::pair{prefill_device, decode_device}, std::pair{decode_device, prefill_device}}) {
          HANDOFF_CUDA_RETURN(cudaSetDevice(from), "set device");
          const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
          if (e == cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();
          } else if (e != cudaSuccess) {
            return CudaError(e, "enable peer access");
          }
        }
      }
    }
    KVPOOL_RETURN_IF_ERROR(NewStream(prefill_device, gather_stream));
    KVPOOL_RETURN_IF_ERROR(NewStream(prefill_device, copy_stream));
    KVPOOL_RETURN_IF_ERROR(NewStream(decode_device, scatter_stream));
    if (!peer) KVPOOL_RETURN_IF_ERROR(NewStream(decode_device, h2d_stream));
    for (uint32_t s = 0; s < options.slots; ++s) {
      KVPOOL_RETURN_IF_ERROR(NewBuffer(prefill_device, options.slot_bytes, staging));
      KVPOOL_RETURN_IF_ERROR(NewBuffer(decode_device, options.slot_bytes, landing));
      KVPOOL_RETURN_IF_ERROR(NewEvent(prefill_device, gathered));
      KVPOOL_RETURN_IF_ERROR(NewEvent(decode_device, scattered));
      if (peer) {
        KVPOOL_RETURN_IF_ERROR(NewEvent(prefill_device, moved));
      } else {
        KVPOOL_RETURN_IF_ERROR(NewEvent(prefill_device, staged_out));
        KVPOOL_RETURN_IF_ERROR(NewEvent(decode_device, moved));
        void* p = nullptr;
        HANDOFF_CUDA_RETURN(cudaHostAlloc(&p, options.slot_bytes, cudaHostAllocPortable), "pinned host slot");
        host.push_back(static_cast<std::byte*>(p));
      }
    }
    return Status::Ok();
  }

  struct Piece {
    const PairPlan* pair;
    const HandoffWrite* write;
    const DeviceKvTable* decode;
  };

  // The batch's copies (slot k's staging/host -> landing/host) on `stream`: one submission, or
  // one per piece without batching.
  Status CopyBatch(const std::vector<Piece>& pieces, size_t first, size_t n, const std::vector<std::byte*>& from,
                   const std::vector<std::byte*>& to, cudaStream_t stream, const char* what) {
    std::vector<void*> dsts(n);
    std::vector<const void*> srcs(n);
    std::vector<size_t> sizes(n);
    for (size_t k = 0; k < n; ++k) {
      const uint32_t s = Slot(k);
      dsts[k] = to[s];
      srcs[k] = from[s];
      sizes[k] = pieces[first + k].write->length;
    }
    if (options.batch_copies) {
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t attr_index = 0;
      const cudaError_t e =
          cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attr, &attr_index, 1, stream);
      if (e == cudaSuccess) return Status::Ok();
      if (e != cudaErrorNotSupported && e != cudaErrorCallRequiresNewerDriver) return CudaError(e, what);
      cudaGetLastError();
      options.batch_copies = false;  // a driver older than the batch API: one copy per piece from now on
    }
    for (size_t k = 0; k < n; ++k) {
      HANDOFF_CUDA_RETURN(cudaMemcpyAsync(dsts[k], srcs[k], sizes[k], cudaMemcpyDefault, stream), what);
    }
    return Status::Ok();
  }

  uint32_t Slot(size_t k) const { return static_cast<uint32_t>((next_piece + k) % options.slots); }
  // A slot's first use waits for nothing (its events were never recorded): those calls are skipped.
  bool Reused(size_t k) const { return next_piece + k >= options.slots; }

  // Enqueues the batch pieces[first, first + n) (n <= S) through slots Slot(0..n-1). REQUIRES:
  // every check passed.
  Status EnqueueBatch(const std::vector<Piece>& pieces, size_t first, size_t n, const DeviceKvTable& prefill) {
    const uint32_t last = Slot(n - 1);
    // 1. Gathers into staging[s], each once the slot's previous piece has left it.
    HANDOFF_CUDA_RETURN(cudaSetDevice(prefill_device), "set device");
    for (size_t k = 0; k < n; ++k) {
      const uint32_t s = Slot(k);
      const Piece& pc = pieces[first + k];
      if (Reused(k)) {
        HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(gather_stream, peer ? moved[s] : staged_out[s], 0), "wait");
      }
      KVPOOL_RETURN_IF_ERROR(
          EnqueueRows(true, *pc.pair, prefill, staging[s], gather_stream, pc.write, options.kernel_blocks));
    }
    HANDOFF_CUDA_RETURN(cudaEventRecord(gathered[last], gather_stream), "record");
    // 2. The batch's copies, once gathered and once the landing slots' previous pieces are
    //    scattered (with peer access); through pinned host memory otherwise, where the host slots'
    //    previous pieces must also have moved on.
    HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(copy_stream, gathered[last], 0), "wait");
    if (peer) {
      if (Reused(n - 1)) HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(copy_stream, scattered[last], 0), "wait");
      KVPOOL_RETURN_IF_ERROR(CopyBatch(pieces, first, n, staging, landing, copy_stream, "peer copy"));
      for (size_t k = 0; k < n; ++k) HANDOFF_CUDA_RETURN(cudaEventRecord(moved[Slot(k)], copy_stream), "record");
    } else {
      if (Reused(n - 1)) HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(copy_stream, moved[last], 0), "wait");
      KVPOOL_RETURN_IF_ERROR(CopyBatch(pieces, first, n, staging, host, copy_stream, "copy to pinned host"));
      for (size_t k = 0; k < n; ++k) HANDOFF_CUDA_RETURN(cudaEventRecord(staged_out[Slot(k)], copy_stream), "record");
      HANDOFF_CUDA_RETURN(cudaSetDevice(decode_device), "set device");
      HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(h2d_stream, staged_out[last], 0), "wait");
      if (Reused(n - 1)) HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(h2d_stream, scattered[last], 0), "wait");
      KVPOOL_RETURN_IF_ERROR(CopyBatch(pieces, first, n, host, landing, h2d_stream, "copy from pinned host"));
      for (size_t k = 0; k < n; ++k) HANDOFF_CUDA_RETURN(cudaEventRecord(moved[Slot(k)], h2d_stream), "record");
    }
    // 3. Scatters from landing[s], each freeing its slot as soon as it is done.
    HANDOFF_CUDA_RETURN(cudaSetDevice(decode_device), "set device");
    HANDOFF_CUDA_RETURN(cudaStreamWaitEvent(scatter_stream, moved[last], 0), "wait");
    for (size_t k = 0; k < n; ++k) {
      const uint32_t s = Slot(k);
      const Piece& pc = pieces[first + k];
      KVPOOL_RETURN_IF_ERROR(
          EnqueueRows(false, *pc.pair, *pc.decode, landing[s], scatter_stream, pc.write, options.kernel_blocks));
      HANDOFF_CUDA_RETURN(cudaEventRecord(scattered[s], scatter_stream), "record");
    }
    next_piece += n;
    return Status::Ok();
  }
};

HandoffPipeline::HandoffPipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HandoffPipeline::~HandoffPipeline() = default;

Result<std::unique_ptr<HandoffPipeline>> HandoffPipeline::Create(int prefill_device, int decode_device,
                                                                 const HandoffPipelineOptions& options) {
  KVPOOL_RETURN_IF_ERROR(CheckCudaDevice(prefill_device));
  KVPOOL_RETURN_IF_ERROR(CheckCudaDevice(decode_device));
  if (options.slots == 0) return InvalidArgument("handoff pipeline: slots is 0");
  if (options.slot_bytes == 0) return InvalidArgument("handoff pipeline: slot_bytes is 0");
  auto impl = std::make_unique<Impl>();
  impl->prefill_device = prefill_device;
  impl->decode_device = decode_device;
  impl->options = options;
  KVPOOL_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<HandoffPipeline>(new HandoffPipeline(std::move(impl)));
}

Status HandoffPipeline::Transfer(const HandoffPlan& plan, uint32_t prefill_rank, const DeviceKvTable& prefill,
                                 std::span<const DeviceKvTable* const> decode, CUevent_st* done) {
  Impl& m = *impl_;
  if (prefill_rank >= plan.prefill.num_ranks()) {
    return InvalidArgument("handoff pipeline: prefill rank " + std::to_string(prefill_rank) + " of " +
                           std::to_string(plan.prefill.num_ranks()));
  }
  if (decode.size() != plan.decode.dcp_ranks) {
    return InvalidArgument("handoff pipeline: " + std::to_string(decode.size()) + " decode tables for " +
                           std::to_string(plan.decode.dcp_ranks) + " DCP ranks");
  }
  if (done == nullptr) return InvalidArgument("handoff pipeline: no completion event");
  if (prefill.device() != m.prefill_device) {
    return InvalidArgument("handoff pipeline: prefill cache is on GPU " + std::to_string(prefill.device()) +
                           ", the pipeline gathers on GPU " + std::to_string(m.prefill_device));
  }
  // Check everything before enqueueing anything: a request either goes whole or not at all.
  for (uint32_t d = 0; d < decode.size(); ++d) {
    if (decode[d] == nullptr) continue;
    const PairPlan& pair = plan.pair(prefill_rank, d);
    if (decode[d]->device() != m.decode_device) {
      return InvalidArgument("handoff pipeline: decode rank " + std::to_string(d) + "'s cache is on GPU " +
                             std::to_string(decode[d]->device()) + ", the pipeline scatters on GPU " +
                             std::to_string(m.decode_device));
    }
    KVPOOL_RETURN_IF_ERROR(CheckGather(pair, prefill.cache(), prefill.table()));
    KVPOOL_RETURN_IF_ERROR(CheckScatter(pair, decode[d]->cache(), decode[d]->table()));
    for (const HandoffWrite& w : pair.writes) {
      if (w.length > m.options.slot_bytes) {
        return InvalidArgument("handoff pipeline: a " + std::to_string(w.length) + " B write exceeds the " +
                               std::to_string(m.options.slot_bytes) + " B slots (plan with max_write_bytes <= slot)");
      }
    }
  }
  std::vector<Impl::Piece> pieces;
  for (uint32_t d = 0; d < decode.size(); ++d) {
    if (decode[d] == nullptr) continue;
    const PairPlan& pair = plan.pair(prefill_rank, d);
    for (const HandoffWrite& w : pair.writes) pieces.push_back({&pair, &w, decode[d]});
  }
  size_t first = 0;
  for (size_t n : HandoffBatchSizes(pieces.size(), m.options.slots)) {
    KVPOOL_RETURN_IF_ERROR(m.EnqueueBatch(pieces, first, n, prefill));
    first += n;
  }
  HANDOFF_CUDA_RETURN(cudaSetDevice(m.decode_device), "set device");
  HANDOFF_CUDA_RETURN(cudaEventRecord(done, m.scatter_stream), "record completion");
  return Status::Ok();
}

Status HandoffPipeline::Synchronize() {
  Impl& m = *impl_;
  HANDOFF_CUDA_RETURN(cudaSetDevice(m.prefill_device), "set device");
  HANDOFF_CUDA_RETURN(cudaStreamSynchronize(m.gather_stream), "gather stream");
  HANDOFF_CUDA_RETURN(cudaStreamSynchronize(m.copy_stream), "copy stream");
  HANDOFF_CUDA_RETURN(cudaSetDevice(m.decode_device), "set device");
  if (m.h2d_stream) HANDOFF_CUDA_RETURN(cudaStreamSynchronize(m.h2d_stream), "h2d stream");
  HANDOFF_CUDA_RETURN(cudaStreamSynchronize(m.scatter_stream), "scatter stream");
  return Status::Ok();
}

bool HandoffPipeline::uses_peer_access() const { return impl_->peer; }
uint64_t HandoffPipeline::pieces_moved() const { return impl_->next_piece; }

}  // namespace kvpool::handoff
