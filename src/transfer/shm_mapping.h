// ShmMapping: a store's segment mapped into this process from the fds of an shm grant
// (shm_protocol.h), with its served-flag page and, when its store has an SSD tier, the tier's file. ShmTransport copies through it; the mapping is
// unmapped when the last holder (the channel, a copy in flight, a zero-copy reader) drops it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "transfer/shm_protocol.h"
#include "transfer/transfer_engine.h"

namespace kvpool::transfer {

class ShmMapping final : public SegmentMapping {
 public:
  // Maps grant.size bytes of the segment read-write (MAP_POPULATE when `prefault`; nothing for
  // size 0) and the flag page read-only, and keeps its own reference to the tier file. INTERNAL
  // when either mmap fails.
  static Result<std::shared_ptr<ShmMapping>> Map(uint64_t segment_id, const ShmGrant& grant, bool prefault);

  ~ShmMapping() override;
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  char* base() const { return base_; }
  uint64_t size() const { return size_; }
  std::span<const std::byte> bytes() const override { return {reinterpret_cast<const std::byte*>(base_), size_}; }
  // The store still serves the segment (its flag page says so).
  bool served() const override { return ShmFlagSaysServed(flag_); }
  Status StaleStatus() const;
  // The store's SSD tier file (-1: none) and the bytes of it that may be read.
  int tier_fd() const { return tier_fd_.get(); }
  uint64_t tier_size() const { return tier_size_; }

 private:
  ShmMapping() = default;
  uint64_t segment_id_ = 0;
  char* base_ = nullptr;
  uint64_t size_ = 0;
  void* flag_ = nullptr;
  UniqueFd tier_fd_;
  uint64_t tier_size_ = 0;
};

}  // namespace kvpool::transfer
