#include "transfer/shm_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

#include <fmt/format.h>

#include "transfer/socket_util.h"

namespace kvpool::transfer {

Result<std::shared_ptr<ShmMapping>> ShmMapping::Map(uint64_t segment_id, const ShmGrant& grant, bool prefault) {
  auto mapping = std::shared_ptr<ShmMapping>(new ShmMapping);
  mapping->segment_id_ = segment_id;
  mapping->size_ = grant.size;
  if (grant.size > 0) {
    int flags = MAP_SHARED | (prefault ? MAP_POPULATE : 0);
    void* base = ::mmap(nullptr, grant.size, PROT_READ | PROT_WRITE, flags, grant.segment_fd.get(), 0);
    if (base == MAP_FAILED) {
      return ErrnoStatus(StatusCode::kInternal, fmt::format("mmap segment {}", segment_id), errno);
    }
    mapping->base_ = static_cast<char*>(base);
  }
  void* flag = ::mmap(nullptr, kShmFlagPageSize, PROT_READ, MAP_SHARED, grant.flag_fd.get(), 0);
  if (flag == MAP_FAILED) {
    return ErrnoStatus(StatusCode::kInternal, fmt::format("mmap flag of segment {}", segment_id), errno);
  }
  mapping->flag_ = flag;
  if (grant.tier_fd.valid()) {
    mapping->tier_fd_.Reset(::fcntl(grant.tier_fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!mapping->tier_fd_.valid()) {
      return ErrnoStatus(StatusCode::kInternal, fmt::format("dup of segment {}'s tier file", segment_id), errno);
    }
    mapping->tier_size_ = grant.tier_size;
  }
  return mapping;
}

ShmMapping::~ShmMapping() {
  if (base_ != nullptr) ::munmap(base_, size_);
  if (flag_ != nullptr) ::munmap(flag_, kShmFlagPageSize);
}

Status ShmMapping::StaleStatus() const {
  return Stale(fmt::format("segment {} was withdrawn by its store", segment_id_));
}

}  // namespace kvpool::transfer
