// The end-to-end checksum of a value: xxh3-64 of its bytes. The writer computes it before it
// puts the value; the master keeps it with the object's metadata (and every store in its
// index, so it survives a failover); a reader compares it with the bytes it read before
// anything uses them, and a mismatch is a miss (CORRUPT), never bytes served. The handoff
// checks each piece it lands the same way.
//
// The x86 build picks the widest vector unit at run time (AVX-512, AVX2 or SSE2). From cache
// that is 30-60 GB/s a core; from memory a core reads only ~8-15 GB/s, less than one PCIe
// link's restore, so a batch's values are hashed on several threads at once (ChecksumAll).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/helper_pool.h"

namespace kvpool {

uint64_t Checksum(const void* data, size_t length);
inline uint64_t Checksum(std::span<const std::byte> bytes) { return Checksum(bytes.data(), bytes.size()); }

// The checksum of bytes that arrive piece by piece, in order: Digest() equals Checksum() of
// every piece given to Update, concatenated. Hashing a piece just after it landed reads it
// from cache instead of from memory (the transports hash what they copy in this way).
class ChecksumStream {
 public:
  ChecksumStream();
  ~ChecksumStream();
  ChecksumStream(const ChecksumStream&) = delete;
  ChecksumStream& operator=(const ChecksumStream&) = delete;
  void Update(const void* data, size_t length);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// memcpy(dst, src, length) that also returns Checksum() of the bytes it wrote, hashing each
// 64 KiB piece right after copying it, while the piece is still in cache.
uint64_t CopyWithChecksum(void* dst, const void* src, size_t length);

// out[i] = Checksum(values[i]), the values shared among `pool`'s helpers and the calling
// thread; returns once every one is done. REQUIRES: out.size() == values.size().
void ChecksumAll(HelperPool& pool, std::span<const std::span<const std::byte>> values, std::span<uint64_t> out);

class ChecksumJob;
// The same, on the pool's helpers while the caller does other work (the restore unpacks the
// same bytes meanwhile); Wait() joins in with what no helper has claimed yet and returns once
// every value is hashed. REQUIRES: `values` and `out` outlive Wait() (the destructor waits).
class BackgroundChecksums {
 public:
  BackgroundChecksums(HelperPool& pool, std::span<const std::span<const std::byte>> values, std::span<uint64_t> out);
  ~BackgroundChecksums() { Wait(); }
  BackgroundChecksums(const BackgroundChecksums&) = delete;
  BackgroundChecksums& operator=(const BackgroundChecksums&) = delete;
  void Wait();

 private:
  std::shared_ptr<ChecksumJob> job_;
};

}  // namespace kvpool
