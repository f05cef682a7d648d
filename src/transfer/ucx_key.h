// What a client needs to reach one segment with UCX one-sided reads and writes: the store's
// worker address, the segment's remote key and where the segment lies in the store's memory.
// A store serving UCX answers a tcp frame of op 4 (FrameOp::kUcxKey) with these bytes, over a
// connection that proved the pool's secret like any other (README.md, "UCX").
//
//   magic "KVPU" u32 | version u8 = 1 | 3 bytes 0 | base u64 | size u64 |
//   address length u32 | rkey length u32 | address | rkey | zeros to kUcxKeyBytes
//
// No UCX here: the store answers without UCX too (UNAVAILABLE), and the decoder is fuzzed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace kvpool::transfer {

inline constexpr uint32_t kUcxKeyMagic = 0x5550564B;  // "KVPU" on the wire
inline constexpr uint8_t kUcxKeyVersion = 1;
// The reply's fixed length (the frame's length field): room for any worker address and rkey
// UCX packs for verbs, RoCE, shared memory and tcp together.
inline constexpr uint64_t kUcxKeyBytes = 4096;

struct UcxSegmentKey {
  uint64_t base = 0;  // the segment's first byte in the store's address space
  uint64_t size = 0;
  std::vector<uint8_t> worker_address;
  std::vector<uint8_t> rkey;
};

// INVALID_ARGUMENT when the address and key do not fit in kUcxKeyBytes.
Status EncodeUcxKey(const UcxSegmentKey& key, std::vector<uint8_t>* out);
// INVALID_ARGUMENT for anything but kUcxKeyBytes holding a key: bad magic or version, an
// empty address or key, lengths past the end, a base + size that wraps.
Status DecodeUcxKey(std::span<const uint8_t> in, UcxSegmentKey* key);

}  // namespace kvpool::transfer
