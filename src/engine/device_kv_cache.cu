// KvCacheMemory in a CUDA device's memory (KVPOOL_CUDA): the planes are one cudaMalloc, and the
// emulated forward pass (WriteKv) and the verification (CountKvMismatches) are kernels computing
// kv_pattern_word.h's hash, the same function the CPU path uses, so host and device caches hold
// identical bytes. Each call uploads the block ids and block keys of its token range, runs on
// the cache's own stream and synchronises before it returns. Links cudart only.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/device_kv_cache.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {
namespace {

using connector::BlockId;

Status CudaError(cudaError_t e, const std::string& what) {
  // No fmt in device-compiled files: nvcc rejects its consteval format strings.
  const std::string m = "replay device cache: CUDA " + what + ": " + cudaGetErrorString(e);
  return e == cudaErrorMemoryAllocation ? NoSpace(m) : Internal(m);
}

// Everything a kernel needs to find (token, layer, plane) of local tokens [begin, end).
struct PatternArgs {
  std::byte* const* plane_bases;  // device array, one per plane
  const BlockId* blocks;          // device: ids of the cache's blocks first_block, first_block + 1, ...
  const uint64_t* keys;           // device: keys of the global blocks first_key, first_key + 1, ...
  CacheTokens cache_tokens;       // local -> global token
  uint64_t first_block;
  uint64_t first_key;
  uint64_t begin;
  uint64_t tokens;  // end - begin
  uint64_t block_stride;
  uint32_t block_tokens;
  uint32_t token_bytes;  // plane_token_bytes
  uint32_t planes_per_layer;
  uint32_t num_planes;
  uint32_t first_layer;
  uint32_t words;  // 8-byte words per entry, the last one possibly partial
};

// Entry e = plane_index * tokens + token offset: neighbouring threads touch neighbouring bytes.
__device__ std::byte* EntryAddress(const PatternArgs& a, uint64_t e, uint64_t* seed) {
  const uint64_t plane_index = e / a.tokens;
  const uint64_t local = a.begin + e % a.tokens;
  const uint64_t global = a.cache_tokens.Global(local);
  const uint32_t layer = static_cast<uint32_t>(plane_index / a.planes_per_layer);
  const uint32_t plane = static_cast<uint32_t>(plane_index % a.planes_per_layer);
  *seed = KvEntrySeed(a.keys[global / a.block_tokens - a.first_key], a.first_layer + layer, plane, global);
  return a.plane_bases[plane_index] +
         static_cast<uint64_t>(a.blocks[local / a.block_tokens - a.first_block]) * a.block_stride +
         (local % a.block_tokens) * a.token_bytes;
}

// One thread per 8-byte word of one entry.
__global__ void WritePattern(PatternArgs a, bool word_aligned) {
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= a.tokens * a.num_planes * a.words) return;
  const uint32_t w = static_cast<uint32_t>(i % a.words);
  uint64_t seed;
  std::byte* entry = EntryAddress(a, i / a.words, &seed);
  const uint64_t word = KvPatternWord(seed, w * 8);
  const uint32_t n = min(8u, a.token_bytes - w * 8);
  if (word_aligned) {
    *reinterpret_cast<uint64_t*>(entry + w * 8) = word;
  } else {
    for (uint32_t b = 0; b < n; ++b) entry[w * 8 + b] = static_cast<std::byte>(word >> (8 * b));
  }
}

// One thread per entry; counts entries with any byte off.
__global__ void CountPatternMismatches(PatternArgs a, unsigned long long* mismatches) {
  const uint64_t e = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (e >= a.tokens * a.num_planes) return;
  uint64_t seed;
  const std::byte* entry = EntryAddress(a, e, &seed);
  for (uint32_t w = 0; w < a.words; ++w) {
    const uint64_t word = KvPatternWord(seed, w * 8);
    const uint32_t n = min(8u, a.token_bytes - w * 8);
    for (uint32_t b = 0; b < n; ++b) {
      if (entry[w * 8 + b] != static_cast<std::byte>(word >> (8 * b))) {
        atomicAdd(mismatches, 1ull);
        return;
      }
    }
  }
}

class DeviceKvCacheMemory final : public KvCacheMemory {
 public:
  explicit DeviceKvCacheMemory(int device) : device_(device) {}
  ~DeviceKvCacheMemory() override {
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    for (void* p : {static_cast<void*>(planes_), static_cast<void*>(plane_bases_), scratch_}) {
      if (p) cudaFree(p);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status Init(const connector::PagedKvLayout& layout, uint64_t num_blocks) {
    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return CudaError(e, "set device " + std::to_string(device_));
    const uint64_t plane_bytes = layout.plane_bytes(num_blocks);
    if ((e = cudaMalloc(&planes_, plane_bytes * layout.num_planes())) != cudaSuccess) {
      return CudaError(e, "allocate " + std::to_string(plane_bytes * layout.num_planes()) + " bytes");
    }
    if ((e = cudaMemset(planes_, 0, plane_bytes * layout.num_planes())) != cudaSuccess) return CudaError(e, "zero");
    cache_.layout = layout;
    cache_.num_blocks = num_blocks;
    for (uint32_t p = 0; p < layout.num_planes(); ++p) cache_.plane_bases.push_back(planes_ + p * plane_bytes);
    const size_t bases_bytes = cache_.plane_bases.size() * sizeof(std::byte*);
    if ((e = cudaMalloc(&plane_bases_, bases_bytes)) != cudaSuccess) return CudaError(e, "allocate plane table");
    if ((e = cudaMemcpy(plane_bases_, cache_.plane_bases.data(), bases_bytes, cudaMemcpyHostToDevice)) != cudaSuccess) {
      return CudaError(e, "upload plane table");
    }
    if ((e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess) {
      return CudaError(e, "create stream");
    }
    return Status::Ok();
  }

  const connector::PagedKvCache& cache() const override { return cache_; }
  int cuda_device() const override { return device_; }

  Status WriteKv(std::span<const BlockId> block_table, uint32_t first_layer, std::span<const uint64_t> block_keys,
                 uint64_t begin, uint64_t end) override {
    if (begin >= end) return Status::Ok();
    PatternArgs a;
    KVPOOL_RETURN_IF_ERROR(Prepare(block_table, first_layer, block_keys, begin, end, CacheTokens{}, &a));
    const uint64_t threads = a.tokens * a.num_planes * a.words;
    const bool word_aligned = a.token_bytes % 8 == 0 && a.block_stride % 8 == 0;
    WritePattern<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream_>>>(a, word_aligned);
    return Finish("write KV");
  }

  Result<uint64_t> CountKvMismatches(std::span<const BlockId> block_table, uint32_t first_layer,
                                     std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end,
                                     const CacheTokens& tokens) override {
    if (begin >= end) return uint64_t{0};
    PatternArgs a;
    KVPOOL_RETURN_IF_ERROR(Prepare(block_table, first_layer, block_keys, begin, end, tokens, &a));
    auto* counter = reinterpret_cast<unsigned long long*>(scratch_);  // the scratch's first 8 bytes
    cudaError_t e = cudaMemsetAsync(counter, 0, sizeof(*counter), stream_);
    if (e != cudaSuccess) return CudaError(e, "clear counter");
    const uint64_t threads = a.tokens * a.num_planes;
    CountPatternMismatches<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream_>>>(a, counter);
    unsigned long long mismatches = 0;
    e = cudaMemcpyAsync(&mismatches, counter, sizeof(mismatches), cudaMemcpyDeviceToHost, stream_);
    if (e != cudaSuccess) return CudaError(e, "read counter");
    KVPOOL_RETURN_IF_ERROR(Finish("count KV mismatches"));
    return uint64_t{mismatches};
  }

 private:
  // Checks the range against the table (a bad block id must never become a write outside the
  // cache), uploads the range's block ids and keys behind an 8-byte counter in the scratch.
  Status Prepare(std::span<const BlockId> block_table, uint32_t first_layer, std::span<const uint64_t> block_keys,
                 uint64_t begin, uint64_t end, const CacheTokens& tokens, PatternArgs* a) {
    const connector::PagedKvLayout& l = cache_.layout;
    const uint64_t first_block = begin / l.block_tokens, last_block = (end - 1) / l.block_tokens;
    // Global order follows local order, so the range's keys are one run too.
    const uint64_t first_key = tokens.Global(begin) / l.block_tokens, last_key = tokens.Global(end - 1) / l.block_tokens;
    if (last_block >= block_table.size() || last_key >= block_keys.size()) {
      return InvalidArgument("replay device cache: block table or keys shorter than the token range");
    }
    const uint64_t n = last_block - first_block + 1, keys = last_key - first_key + 1;
    for (uint64_t b = first_block; b <= last_block; ++b) {
      if (block_table[b] < 0 || static_cast<uint64_t>(block_table[b]) >= cache_.num_blocks) {
        return InvalidArgument("replay device cache: block id " + std::to_string(block_table[b]) + " outside the cache");
      }
    }
    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return CudaError(e, "set device");
    const size_t keys_offset = 8, blocks_offset = keys_offset + keys * sizeof(uint64_t);
    const size_t need = blocks_offset + n * sizeof(BlockId);
    if (need > scratch_bytes_) {
      const size_t grown = std::max(need, 2 * scratch_bytes_);
      if (scratch_ && (e = cudaFree(scratch_)) != cudaSuccess) return CudaError(e, "free scratch");
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      if ((e = cudaMalloc(&scratch_, grown)) != cudaSuccess) return CudaError(e, "allocate scratch");
      scratch_bytes_ = grown;
    }
    auto* scratch = static_cast<std::byte*>(scratch_);
    if ((e = cudaMemcpyAsync(scratch + keys_offset, block_keys.data() + first_key, keys * sizeof(uint64_t),
                             cudaMemcpyHostToDevice, stream_)) != cudaSuccess ||
        (e = cudaMemcpyAsync(scratch + blocks_offset, block_table.data() + first_block, n * sizeof(BlockId),
                             cudaMemcpyHostToDevice, stream_)) != cudaSuccess) {
      return CudaError(e, "upload block table");
    }
    *a = PatternArgs{plane_bases_,
                     reinterpret_cast<const BlockId*>(scratch + blocks_offset),
                     reinterpret_cast<const uint64_t*>(scratch + keys_offset),
                     tokens,
                     first_block,
                     first_key,
                     begin,
                     end - begin,
                     l.block_stride(),
                     l.block_tokens,
                     l.plane_token_bytes(),
                     l.planes_per_layer(),
                     l.num_planes(),
                     first_layer,
                     (l.plane_token_bytes() + 7) / 8};
    return Status::Ok();
  }

  // Waits for the call's work (the host arrays it read from must outlive the upload).
  Status Finish(const char* what) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    return e == cudaSuccess ? Status::Ok() : CudaError(e, what);
  }

  const int device_;
  std::byte* planes_ = nullptr;
  std::byte** plane_bases_ = nullptr;
  void* scratch_ = nullptr;  // [8-byte counter][block keys][block ids]
  size_t scratch_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  connector::PagedKvCache cache_;
};

}  // namespace

Result<std::unique_ptr<KvCacheMemory>> NewDeviceKvCacheMemory(const connector::PagedKvLayout& layout,
                                                              uint64_t num_blocks, int cuda_device) {
  const int devices = CudaDeviceCount();
  if (cuda_device >= devices) {
    return Unavailable("replay device cache: CUDA device " + std::to_string(cuda_device) + " requested, " +
                       std::to_string(devices) + " present");
  }
  auto memory = std::make_unique<DeviceKvCacheMemory>(cuda_device);
  KVPOOL_RETURN_IF_ERROR(memory->Init(layout, num_blocks));
  return std::unique_ptr<KvCacheMemory>(std::move(memory));
}

int CudaDeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace kvpool::engine
