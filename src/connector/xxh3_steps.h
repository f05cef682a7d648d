// XXH3-64 (seed 0, default secret: the checksum of common/checksum.h) taken apart into the
// steps a GPU can run in parallel, callable from host and device code. checksum_kernel.cu
// hashes objects in device memory with them; xxh3_steps_test.cc proves on the CPU that
// putting the steps together gives libxxhash's XXH3_64bits bit for bit.
//
// Inputs over 240 bytes run XXH3's long loop: eight 64-bit lanes, each stripe of 64 bytes adds
// to every lane, and after each 1 KiB block every lane is scrambled. Within a block a lane only
// adds (mod 2^64), so the sum a block adds to a lane does not depend on the lane's value:
//
//   lane = Initial(l)
//   for every full block b:  lane = Scramble(lane + BlockSum(b, l), l)
//   lane += TailSum(l)       (the partial last block and the last stripe)
//   hash = MergeLanes(lanes, length)
//
// Every BlockSum can be computed at once (one thread each); only the short chain of
// Scrambles per lane is sequential.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define KVPOOL_XXH3_FN __host__ __device__ __forceinline__
#else
#define KVPOOL_XXH3_FN inline
#endif

namespace kvpool::connector::xxh3 {

constexpr uint64_t kPrime32_1 = 0x9E3779B1ULL;
constexpr uint64_t kPrime32_2 = 0x85EBCA77ULL;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3DULL;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ULL;

constexpr unsigned kLanes = 8;
constexpr uint64_t kStripeBytes = 64;
constexpr uint64_t kBlockBytes = 1024;  // 16 stripes; each uses the secret 8 bytes further on
constexpr uint64_t kMaxShortBytes = 240;

// The default secret (XXH3_kSecret, 192 bytes), as little-endian 64-bit words.
struct Secret {
  uint64_t words[24];
};
constexpr Secret kDefaultSecret = {{
    0xbe4ba423396cfeb8ULL, 0x1cad21f72c81017cULL, 0xdb979083e96dd4deULL, 0x1f67b3b7a4a44072ULL,
    0x78e5c0cc4ee679cbULL, 0x2172ffcc7dd05a82ULL, 0x8e2443f7744608b8ULL, 0x4c263a81e69035e0ULL,
    0xcb00c391bb52283cULL, 0xa32e531b8b65d088ULL, 0x4ef90da297486471ULL, 0xd8acdea946ef1938ULL,
    0x3f349ce33f76faa8ULL, 0x1d4f0bc7c7bbdcf9ULL, 0x3159b4cd4be0518aULL, 0x647378d9c97e9fc8ULL,
    0xc3ebd33483acc5eaULL, 0xeb6313faffa081c5ULL, 0x49daf0b751dd0d17ULL, 0x9e68d429265516d3ULL,
    0xfca1477d58be162bULL, 0xce31d07ad1b8f88fULL, 0x280416958f3acb45ULL, 0x7e404bbbcafbd7afULL,
}};

// The secret's 8 bytes at byte `offset` (any offset up to 184), little-endian.
KVPOOL_XXH3_FN uint64_t SecretAt(const Secret& s, unsigned offset) {
  const unsigned word = offset / 8, shift = 8 * (offset % 8);
  return shift == 0 ? s.words[word] : (s.words[word] >> shift) | (s.words[word + 1] << (64 - shift));
}

// 8 input bytes, little-endian, at any alignment (the GPU faults on unaligned wide loads).
KVPOOL_XXH3_FN uint64_t Load64(const unsigned char* p) {
#ifdef __CUDA_ARCH__
  if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
#else
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
KVPOOL_XXH3_FN uint32_t Load32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// The 128-bit product of a and b, its two halves xor-ed.
KVPOOL_XXH3_FN uint64_t MulFold(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return (a * b) ^ __umul64hi(a, b);
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}

KVPOOL_XXH3_FN uint64_t Avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}

KVPOOL_XXH3_FN uint64_t Xxh64Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}

KVPOOL_XXH3_FN uint64_t Rrmxmx(uint64_t h, uint64_t length) {
  h ^= ((h << 49) | (h >> 15)) ^ ((h << 24) | (h >> 40));
  h *= 0x9FB21C651E98DF25ULL;
  h ^= (h >> 35) + length;
  h *= 0x9FB21C651E98DF25ULL;
  return h ^ (h >> 28);
}

KVPOOL_XXH3_FN uint64_t Mix16(const unsigned char* in, const Secret& s, unsigned offset) {
  return MulFold(Load64(in) ^ SecretAt(s, offset), Load64(in + 8) ^ SecretAt(s, offset + 8));
}

// The whole hash of an input of at most 240 bytes (one thread).
KVPOOL_XXH3_FN uint64_t HashShort(const unsigned char* in, uint64_t length, const Secret& s) {
  if (length == 0) return Xxh64Avalanche(SecretAt(s, 56) ^ SecretAt(s, 64));
  if (length <= 3) {
    const uint32_t combined = uint32_t{in[0]} << 16 | uint32_t{in[length >> 1]} << 24 | uint32_t{in[length - 1]} |
                              static_cast<uint32_t>(length) << 8;
    const uint64_t secret = SecretAt(s, 0);
    return Xxh64Avalanche(combined ^ ((secret & 0xFFFFFFFF) ^ (secret >> 32)));
  }
  if (length <= 8) {
    const uint64_t input = Load32(in + length - 4) + (uint64_t{Load32(in)} << 32);
    return Rrmxmx(input ^ (SecretAt(s, 8) ^ SecretAt(s, 16)), length);
  }
  if (length <= 16) {
    const uint64_t lo = Load64(in) ^ (SecretAt(s, 24) ^ SecretAt(s, 32));
    const uint64_t hi = Load64(in + length - 8) ^ (SecretAt(s, 40) ^ SecretAt(s, 48));
#ifdef __CUDA_ARCH__
    const uint64_t swapped = __byte_perm(static_cast<unsigned>(lo >> 32), 0, 0x0123) |
                             uint64_t{__byte_perm(static_cast<unsigned>(lo), 0, 0x0123)} << 32;
#else
    const uint64_t swapped = __builtin_bswap64(lo);
#endif
    return Avalanche(length + swapped + hi + MulFold(lo, hi));
  }
  uint64_t acc = length * kPrime64_1;
  if (length <= 128) {
    // Pairs from both ends inwards: bytes [16i, 16i+16) and [len-16(i+1), len-16i).
    for (unsigned i = 0; i < 4 && (i == 0 || length > 32 * i); ++i) {
      acc += Mix16(in + 16 * i, s, 32 * i);
      acc += Mix16(in + length - 16 * (i + 1), s, 32 * i + 16);
    }
    return Avalanche(acc);
  }
  for (unsigned i = 0; i < 8; ++i) acc += Mix16(in + 16 * i, s, 16 * i);
  acc = Avalanche(acc);
  for (unsigned i = 8; i < length / 16; ++i) acc += Mix16(in + 16 * i, s, 16 * (i - 8) + 3);
  acc += Mix16(in + length - 16, s, 136 - 17);
  return Avalanche(acc);
}

// --- The long loop (inputs over 240 bytes) ---

// Full 1 KiB blocks, each followed by a scramble; the tail after them is never empty.
KVPOOL_XXH3_FN uint64_t FullBlocks(uint64_t length) { return (length - 1) / kBlockBytes; }

KVPOOL_XXH3_FN uint64_t Initial(unsigned lane) {
  const uint64_t init[kLanes] = {kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3,
                                 kPrime64_4, kPrime32_2, kPrime64_5, kPrime32_1};
  return init[lane];
}

// What one stripe adds to `lane`: the neighbouring lane's input word, plus the product of the
// two halves of the lane's own input word xor its key.
KVPOOL_XXH3_FN uint64_t StripeAdd(const unsigned char* stripe, unsigned lane, uint64_t key) {
  const uint64_t keyed = Load64(stripe + 8 * lane) ^ key;
  return Load64(stripe + 8 * (lane ^ 1)) + (keyed & 0xFFFFFFFF) * (keyed >> 32);
}

// What `stripes` stripes from `block` add to `lane` (stripe i uses the key 8 i bytes in).
KVPOOL_XXH3_FN uint64_t BlockSum(const unsigned char* block, unsigned stripes, unsigned lane, const Secret& s) {
  uint64_t sum = 0;
  for (unsigned i = 0; i < stripes; ++i) sum += StripeAdd(block + kStripeBytes * i, lane, s.words[i + lane]);
  return sum;
}

// What the partial last block and the last 64 bytes add to `lane` after the last scramble.
KVPOOL_XXH3_FN uint64_t TailSum(const unsigned char* in, uint64_t length, unsigned lane, const Secret& s) {
  const uint64_t tail = FullBlocks(length) * kBlockBytes;
  const unsigned stripes = static_cast<unsigned>((length - 1 - tail) / kStripeBytes);
  return BlockSum(in + tail, stripes, lane, s) + StripeAdd(in + length - kStripeBytes, lane, SecretAt(s, 121 + 8 * lane));
}

KVPOOL_XXH3_FN uint64_t Scramble(uint64_t acc, unsigned lane, const Secret& s) {
  acc ^= acc >> 47;
  acc ^= s.words[16 + lane];
  return acc * kPrime32_1;
}

KVPOOL_XXH3_FN uint64_t MergeLanes(const uint64_t* lanes, uint64_t length, const Secret& s) {
  uint64_t h = length * kPrime64_1;
  for (unsigned i = 0; i < 4; ++i) {
    h += MulFold(lanes[2 * i] ^ SecretAt(s, 11 + 16 * i), lanes[2 * i + 1] ^ SecretAt(s, 19 + 16 * i));
  }
  return Avalanche(h);
}

}  // namespace kvpool::connector::xxh3
