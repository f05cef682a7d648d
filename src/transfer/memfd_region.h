// MemfdRegion: a pre-faulted memfd-backed region that a SegmentServer can serve (same-host
// peers map it through the memfd): a handoff receiver's landing buffer, and a stand-in for a
// store's segment in tests and benchmarks (the store builds its own, with huge pages).
// Also a deterministic byte pattern so two processes agree on a segment's contents.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace kvpool::transfer {

class MemfdRegion {
 public:
  static Result<std::unique_ptr<MemfdRegion>> Create(uint64_t size, const std::string& name = "kvpool-test-segment");
  ~MemfdRegion();
  MemfdRegion(const MemfdRegion&) = delete;
  MemfdRegion& operator=(const MemfdRegion&) = delete;

  char* data() const { return data_; }
  uint64_t size() const { return size_; }
  int memfd() const { return fd_; }

 private:
  MemfdRegion(char* data, uint64_t size, int fd) : data_(data), size_(size), fd_(fd) {}
  char* data_;
  uint64_t size_;
  int fd_;
};

// Byte `i` of pattern `seed`; FillPattern writes bytes [offset, offset+length) of it.
inline uint8_t PatternByte(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint8_t>((x >> 29) ^ (x >> 47));
}
void FillPattern(char* out, uint64_t offset, uint64_t length, uint64_t seed);

// Fresh pages cost ~12 µs each on first touch; touch them before measuring anything.
void Prefault(char* data, uint64_t length);

}  // namespace kvpool::transfer
