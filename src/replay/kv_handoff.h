// KvHandoff: moves one request's KV from the prefill instance (one paged cache per pipeline
// stage, each holding its own layers of every token) into the decode instance's paged cache
// (every layer), before the first decode step.
//
// An interface so the real path — gather per destination GPU, large writes (<= 8 MiB) into a
// landing buffer, scatter into decode's pages (src/handoff/) — can replace the CPU reference
// below without touching the deployment. The deployment verifies the decode cache against
// the deterministic KV after every handoff, whichever implementation ran.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "connector/paged_kv_layout.h"

namespace kvpool::replay {

struct KvHandoffRequest {
  uint64_t request_id = 0;
  uint64_t tokens = 0;  // tokens [0, tokens) move
  // Prefill: stage s's cache, the global index of its first layer, and its block table.
  std::vector<const connector::PagedKvCache*> stage_caches;
  std::vector<uint32_t> stage_first_layers;
  std::vector<std::span<const connector::BlockId>> stage_block_tables;
  // Decode: one cache holding every layer (global layer l is its layer l).
  const connector::PagedKvCache* decode_cache = nullptr;
  std::span<const connector::BlockId> decode_block_table;
};

class KvHandoff {
 public:
  virtual ~KvHandoff() = default;
  // Copies the request's KV; returns the bytes moved. INVALID_ARGUMENT for mismatched
  // layouts or block tables too short for `tokens`.
  virtual Result<uint64_t> Transfer(const KvHandoffRequest& request) = 0;
  virtual const char* name() const = 0;
};

// The reference: a memcpy per (token, layer, plane) on the calling thread.
std::unique_ptr<KvHandoff> NewCpuKvHandoff();

}  // namespace kvpool::replay
