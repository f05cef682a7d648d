// UcxSegments: the store's side of UCX. Registers each served segment with UCX
// (ucp_mem_map) and packs the key reply (ucx_key.h) that clients fetch with a tcp frame of
// op 4; clients then read and write the segment one-sided, without this process's threads.
// Dropping a registration unmaps it: with RDMA, later remote access fails at the NIC. UCX's
// tcp and shared-memory transports emulate one-sided access in software and check no key
// (README.md, "UCX").
//
// No UCX types here: without UCX built, Start says so (ucx_absent.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transfer/transfer_engine.h"  // UcxSettings

namespace kvpool::transfer {

// One registered segment; unregistered when dropped. REQUIRES: dropped before its UcxSegments.
class UcxRegistration {
 public:
  virtual ~UcxRegistration() = default;
  // kUcxKeyBytes: what op 4 answers for this segment.
  virtual const std::vector<uint8_t>& key_reply() const = 0;
};

class UcxSegments {
 public:
  // UNAVAILABLE, saying why, when UCX cannot start (or is not built).
  static Result<std::unique_ptr<UcxSegments>> Start(const UcxSettings& settings);
  virtual ~UcxSegments() = default;
  // Registers [base, base + size). Control path: blocks while UCX maps the memory.
  virtual Result<std::unique_ptr<UcxRegistration>> Register(void* base, uint64_t size) = 0;
  // For the start-up log: which transports UCX may use, whether it can move CUDA memory.
  virtual std::string Describe() const = 0;
};

}  // namespace kvpool::transfer
