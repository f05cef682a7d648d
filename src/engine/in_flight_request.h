// InFlightRequest: the deployment's state for one request between Submit and its record
// being handed back. Internal to the deployment and its instances.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "connector/chunk_keys.h"
#include "connector/paged_kv_layout.h"
#include "engine/request_record.h"

namespace kvpool::engine {

struct InFlightRequest {
  RequestRecord record;
  std::vector<connector::TokenId> tokens;
  std::vector<uint64_t> block_keys;  // kv_pattern.h: one per (possibly partial) block
  std::function<void(const RequestRecord&)> on_done;

  uint64_t gate_tokens = 0;  // reserved at the decode instance's admission gate
  bool gate_admitted = false;

  // Prefill: one block table shared by every stage of the instance.
  std::vector<connector::BlockId> prefill_blocks;
  uint64_t compute_from = 0;  // first token prefill computes (after GPU cache and pool)
  uint64_t computed_until = 0;  // progress of chunked prefill
  bool in_micro_batch = false;  // a chunk of it is in the prefill pipeline
  // Prefetch: routed when it arrived (-1: routed once admitted); while `prefetched`, it holds
  // prefill_blocks (its GPU-cached prefix and the pool's run beyond it, restored) before it
  // started, and that restore is done at emulated time restore_done_s.
  int routed_to = -1;
  bool prefetched = false;
  double restore_done_s = 0;

  // Decode: one block table per DCP rank, for the tokens that rank holds (empty when none held).
  std::vector<std::vector<connector::BlockId>> decode_blocks;
  uint64_t generated = 0;  // output tokens so far (the first comes from prefill)
};

}  // namespace kvpool::engine
