// The CUDA data path of the handoff (built with KVPOOL_CUDA; without it every entry point
// returns UNAVAILABLE and callers use handoff_copy.h's CPU path).
//
//  - DeviceKvTable: one side's cache (plane bases) and one request's block table, copied to the
//    cache's GPU once per request, so kernels compute every address from the plan's parameters.
//  - GatherCuda / ScatterCuda: the pair's rows (or one piece's) between a paged cache and a
//    contiguous buffer, on a caller-provided stream; 16-byte loads and stores whenever every
//    base, stride and row size allows (576 B rows do).
//  - HandoffPipeline: the same-host GPU -> GPU transfer. Per piece (<= max_write_bytes):
//    gather into a staging slot on the prefill GPU -> one large copy (cudaMemcpyPeerAsync, or
//    two copies through pinned host memory when peer access is off) into a landing slot on the
//    decode GPU -> scatter from it. Slots are a fixed ring (default 3 on each side), reused in
//    order; events order each slot's uses, so the gather of piece i+1, the copy of piece i and
//    the scatter of piece i-1 overlap. When every slot is busy the next piece simply waits on
//    the GPU (back-pressure; nothing fails and the host never blocks).
//
// CUDA types appear only as the opaque handles cudaStream_t / cudaEvent_t are typedefs of, so
// this header compiles without the CUDA toolkit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "handoff/handoff_plan.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*
struct CUevent_st;   // cudaEvent_t is CUevent_st*

namespace kvpool::handoff {

// A cache and one request's block table as the kernels see them, on the cache's GPU. Owns its
// two small device arrays.
class DeviceKvTable {
 public:
  // Validates `cache` (its planes must be memory of `device`) and that EVERY id in `table` is
  // below cache.num_blocks (INVALID_ARGUMENT otherwise), then copies the plane bases and the table
  // to `device` (synchronously: the caller may reuse `table` at once). UNAVAILABLE without CUDA.
  static Result<std::unique_ptr<DeviceKvTable>> Upload(const PagedKvCache& cache, std::span<const BlockId> table,
                                                       int device);
  // The same for the next request on this table's GPU, reusing the device arrays when they are
  // large enough (and the plane bases as they are when `cache` has the same planes), so a
  // request costs one small copy instead of allocations. REQUIRES: nothing enqueued with this
  // table is still running. After a failure the table describes no cache: launches with it
  // fail their checks.
  Status Reload(const PagedKvCache& cache, std::span<const BlockId> table);
  // `kept` <- (cache, table) on `device`, for a caller that keeps one table across requests:
  // Reload when `kept` already lives on `device`, else a new Upload (`kept` is null if it fails).
  static Status Load(std::unique_ptr<DeviceKvTable>& kept, const PagedKvCache& cache, std::span<const BlockId> table,
                     int device);
  ~DeviceKvTable();
  DeviceKvTable(const DeviceKvTable&) = delete;
  DeviceKvTable& operator=(const DeviceKvTable&) = delete;

  // The cache (plane bases are device addresses) and table as uploaded; the checks of
  // handoff_copy.h run against these before every launch.
  const PagedKvCache& cache() const { return cache_; }
  std::span<const BlockId> table() const { return table_; }
  int device() const { return device_; }
  // Device arrays: one base per plane (layer-major), and the block ids.
  std::byte* const* device_plane_bases() const { return plane_bases_; }
  const BlockId* device_block_table() const { return block_table_; }
  // The largest power of two (<= 16) dividing every plane base, the block stride and the row size.
  uint32_t alignment() const { return alignment_; }

 private:
  DeviceKvTable() = default;
  PagedKvCache cache_;
  std::vector<BlockId> table_;
  int device_ = -1;
  std::byte** plane_bases_ = nullptr;
  BlockId* block_table_ = nullptr;
  size_t plane_capacity_ = 0, table_capacity_ = 0;  // entries the device arrays hold
  uint32_t alignment_ = 1;
};

// Enqueues the gather of the pair's rows (or `piece`'s rows) from `prefill` into `buffer` (device
// memory of prefill's GPU; for a piece, `buffer` is where the piece's first row goes) on `stream`
// (a stream of prefill's GPU). Same checks as the CPU path: layout and table coverage are
// INVALID_ARGUMENT before anything is launched.
Status GatherCuda(const PairPlan& pair, const DeviceKvTable& prefill, std::byte* buffer, CUstream_st* stream,
                  const HandoffWrite* piece = nullptr);
// Enqueues the scatter of the pair's rows (or `piece`'s) from `buffer` into `decode` on `stream`.
Status ScatterCuda(const PairPlan& pair, const std::byte* buffer, const DeviceKvTable& decode, CUstream_st* stream,
                   const HandoffWrite* piece = nullptr);

struct HandoffPipelineOptions {
  // Staging and landing slots (>= 2 to overlap). Copies are submitted in batches of up to
  // slots / 2 pieces (HandoffBatchSizes), so one batch's gathers fill staging while the
  // previous batch is copied.
  uint32_t slots = 8;
  // Submit each batch as one cudaMemcpyBatchAsync (false: one copy per piece, as before batching;
  // the pipeline also falls back to that when the driver lacks the batch API).
  bool batch_copies = true;
  uint64_t slot_bytes = kDefaultMaxWriteBytes;  // >= the plan's largest write
  bool allow_peer = true;                       // false: always bounce through pinned host memory
                                                // (even when both sides are one GPU)
  // Grid cap for the pipeline's gather and scatter kernels (0: no cap, one block per 16 rows).
  // A piece's kernel only has to keep ahead of its copy, so a cap leaves SMs and HBM bandwidth to
  // the copy engine and to the model running beside the handoff.
  uint32_t kernel_blocks = 0;
};

// How HandoffPipeline groups a request's `pieces` into copy submissions: batches of 1, 2, 4, ...
// pieces from the front and ..., 4, 2, 1 towards the back, at most max(1, slots / 2) each. Small
// at the front so the copy engine never waits long for a batch's gathers (the first copy waits
// for one); small at the back so only one scatter follows the last copy.
inline std::vector<size_t> HandoffBatchSizes(size_t pieces, uint32_t slots) {
  const size_t cap = std::max<size_t>(1, slots / 2);
  std::vector<size_t> head, tail;
  size_t left = pieces;
  for (size_t n = 1; left > 0; n = std::min(2 * n, cap)) {
    for (std::vector<size_t>* end : {&head, &tail}) {
      const size_t take = std::min(n, left);
      if (take == 0) break;
      end->push_back(take);
      left -= take;
    }
  }
  head.insert(head.end(), tail.rbegin(), tail.rend());
  return head;
}

inline Status DeviceKvTable::Load(std::unique_ptr<DeviceKvTable>& kept, const PagedKvCache& cache,
                                  std::span<const BlockId> table, int device) {
  if (kept && kept->device() == device) return kept->Reload(cache, table);
  kept.reset();
  auto made = Upload(cache, table, device);
  if (!made.ok()) return made.status();
  kept = std::move(made).value();
  return Status::Ok();
}

// Same-host GPU -> GPU handoff from one prefill GPU to one decode GPU (they may be the same GPU).
// Owns its streams, events and slot buffers. One thread at a time.
class HandoffPipeline {
 public:
  // UNAVAILABLE without CUDA or without those devices.
  static Result<std::unique_ptr<HandoffPipeline>> Create(int prefill_device, int decode_device,
                                                         const HandoffPipelineOptions& options = {});
  ~HandoffPipeline();
  HandoffPipeline(const HandoffPipeline&) = delete;
  HandoffPipeline& operator=(const HandoffPipeline&) = delete;

  // Enqueues every piece of every pair (prefill_rank, d) for which decode[d] is not null:
  // gather on the prefill GPU, copy, scatter on the decode GPU. Returns once enqueued; then
  // records `done` (an event the caller created on the decode GPU) after the last scatter: the
  // decode side treats the request as ready only once `done` has completed (cudaStreamWaitEvent
  // on its compute stream, or cudaEventSynchronize). The caches and tables must stay alive and
  // untouched until then. `prefill` must live on this pipeline's prefill GPU and every non-null
  // decode[d] on its decode GPU; decode.size() must be the plan's dcp_ranks.
  Status Transfer(const HandoffPlan& plan, uint32_t prefill_rank, const DeviceKvTable& prefill,
                  std::span<const DeviceKvTable* const> decode, CUevent_st* done);

  // Waits for everything enqueued so far; the first CUDA error among it.
  Status Synchronize();

  bool uses_peer_access() const;
  // Pieces enqueued since creation (each one large write), for reporting.
  uint64_t pieces_moved() const;

  struct Impl;

 private:
  explicit HandoffPipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Number of CUDA devices (0 without KVPOOL_CUDA or a driver).
int HandoffCudaDeviceCount();

}  // namespace kvpool::handoff
