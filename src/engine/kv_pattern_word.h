// The hash behind the emulated model's KV bytes (kv_pattern.h), in one place for the CPU code
// and the CUDA kernels (device_kv_cache.cu), so both write and check exactly the same bytes.
#pragma once

#include <cstdint>

#ifndef KVPOOL_HOST_DEVICE
#ifdef __CUDACC__
#define KVPOOL_HOST_DEVICE __host__ __device__
#else
#define KVPOOL_HOST_DEVICE
#endif
#endif

namespace kvpool::engine {

// splitmix64's finaliser: a cheap, well-mixed 64-bit hash.
KVPOOL_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The seed of one (token, layer, plane) entry; its bytes are the little-endian words
// KvPatternWord(seed, 0), KvPatternWord(seed, 8), ... cut to the entry's length.
KVPOOL_HOST_DEVICE inline uint64_t KvEntrySeed(uint64_t block_key, uint32_t layer, uint32_t plane, uint64_t token) {
  return Mix64(block_key ^ (uint64_t{layer} << 48) ^ (uint64_t{plane} << 40) ^ token);
}
KVPOOL_HOST_DEVICE inline uint64_t KvPatternWord(uint64_t seed, uint32_t byte_offset) {
  return Mix64(seed + byte_offset);
}

}  // namespace kvpool::engine
