#include "transfer/memfd_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace kvpool::transfer {

Result<std::unique_ptr<MemfdRegion>> MemfdRegion::Create(uint64_t size, const std::string& name) {
  int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Internal(fmt::format("memfd_create: {}", std::strerror(errno)));
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    return Internal(fmt::format("ftruncate: {}", std::strerror(errno)));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return Internal(fmt::format("mmap: {}", std::strerror(errno)));
  }
  Prefault(static_cast<char*>(p), size);
  return std::unique_ptr<MemfdRegion>(new MemfdRegion(static_cast<char*>(p), size, fd));
}

MemfdRegion::~MemfdRegion() {
  ::munmap(data_, size_);
  ::close(fd_);
}

void FillPattern(char* out, uint64_t offset, uint64_t length, uint64_t seed) {
  for (uint64_t i = 0; i < length; ++i) out[i] = static_cast<char>(PatternByte(seed, offset + i));
}

void Prefault(char* data, uint64_t length) {
  for (uint64_t i = 0; i < length; i += 4096) data[i] = data[i];
  if (length > 0) std::memset(data, 0, length);
}

}  // namespace kvpool::transfer
