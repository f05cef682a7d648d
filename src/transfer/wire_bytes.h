// Fixed-width little-endian fields in wire buffers (tcp frames, the shm handshake).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvpool::transfer {

static_assert(std::endian::native == std::endian::little, "wire formats are little-endian");

template <typename T>
void PutField(uint8_t* out, size_t at, T value) {
  std::memcpy(out + at, &value, sizeof(T));
}

template <typename T>
T GetField(const uint8_t* in, size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof(T));
  return value;
}

}  // namespace kvpool::transfer
