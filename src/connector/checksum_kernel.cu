// The GPU's Checksum() of objects in device memory: see checksum_kernel.h and xxh3_steps.h.
#include "connector/checksum_kernel.h"

#include "connector/xxh3_steps.h"

namespace kvpool::connector {
namespace {

constexpr unsigned kThreads = 256;

// Slots per object: its full blocks, then its tail.
__host__ __device__ uint64_t Slots(uint64_t object_bytes) { return xxh3::FullBlocks(object_bytes) + 1; }

// sums[(object * slots + slot) * kLanes + lane] = what that slot adds to that lane.
__global__ void SumSlots(const unsigned char* base, uint64_t object_bytes, uint64_t objects, uint64_t* sums,
                         const __grid_constant__ xxh3::Secret secret) {
  const uint64_t slots = Slots(object_bytes);
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= objects * slots * xxh3::kLanes) return;
  const unsigned lane = i % xxh3::kLanes;
  const uint64_t slot = i / xxh3::kLanes % slots, object = i / xxh3::kLanes / slots;
  const unsigned char* in = base + object * object_bytes;
  sums[i] = slot + 1 < slots
                ? xxh3::BlockSum(in + slot * xxh3::kBlockBytes, xxh3::kBlockBytes / xxh3::kStripeBytes, lane, secret)
                : xxh3::TailSum(in, object_bytes, lane, secret);
}

// Eight threads per object: each chains one lane through the object's blocks; the first merges.
// Objects of at most 240 bytes have no lanes: their first thread hashes them whole.
__global__ void ChainAndMerge(const unsigned char* base, uint64_t object_bytes, uint64_t objects,
                              const uint64_t* sums, uint64_t* out, const __grid_constant__ xxh3::Secret secret) {
  __shared__ uint64_t lanes[kThreads];
  const uint64_t object = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / xxh3::kLanes;
  const unsigned lane = threadIdx.x % xxh3::kLanes;
  const bool long_input = object_bytes > xxh3::kMaxShortBytes;
  if (object < objects && long_input) {
    const uint64_t slots = Slots(object_bytes);
    const uint64_t* sum = sums + object * slots * xxh3::kLanes + lane;
    uint64_t acc = xxh3::Initial(lane);
#pragma unroll 8
    for (uint64_t b = 0; b + 1 < slots; ++b) acc = xxh3::Scramble(acc + sum[b * xxh3::kLanes], lane, secret);
    lanes[threadIdx.x] = acc + sum[(slots - 1) * xxh3::kLanes];
  }
  __syncthreads();
  if (object < objects && lane == 0) {
    out[object] = long_input ? xxh3::MergeLanes(lanes + threadIdx.x, object_bytes, secret)
                             : xxh3::HashShort(base + object * object_bytes, object_bytes, secret);
  }
}

unsigned Grid(uint64_t threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

}  // namespace

uint64_t DeviceHashScratchBytes(uint64_t object_bytes, uint64_t objects) {
  return object_bytes > xxh3::kMaxShortBytes ? objects * Slots(object_bytes) * xxh3::kLanes * sizeof(uint64_t) : 0;
}

cudaError_t HashObjectsOnDevice(const std::byte* base, uint64_t object_bytes, uint64_t objects, uint64_t* scratch,
                                uint64_t* out, cudaStream_t stream) {
  if (objects == 0) return cudaSuccess;
  const auto* in = reinterpret_cast<const unsigned char*>(base);
  if (object_bytes > xxh3::kMaxShortBytes) {
    SumSlots<<<Grid(objects * Slots(object_bytes) * xxh3::kLanes), kThreads, 0, stream>>>(in, object_bytes, objects,
                                                                                           scratch, xxh3::kDefaultSecret);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  ChainAndMerge<<<Grid(objects * xxh3::kLanes), kThreads, 0, stream>>>(in, object_bytes, objects, scratch, out,
                                                                        xxh3::kDefaultSecret);
  return cudaGetLastError();
}

}  // namespace kvpool::connector
