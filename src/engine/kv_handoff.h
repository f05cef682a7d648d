// KvHandoff: moves one request's KV from the prefill instance (one paged cache per pipeline
// stage, each holding its own layers of every token) into the decode instance's paged caches
// (one per DCP rank, each holding every layer of its tokens), before the first decode step.
//
// An interface so the real path — gather per destination GPU, large writes (<= 8 MiB) into a
// landing buffer, scatter into decode's pages (src/handoff/) — can replace the CPU reference
// below without touching the deployment. The deployment verifies the decode cache against
// the deterministic KV after every handoff, whichever implementation ran.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "common/status.h"
#include "connector/paged_kv_layout.h"
#include "handoff/handoff_layouts.h"

namespace kvpool::engine {

struct KvHandoffRequest {
  uint64_t request_id = 0;
  uint64_t tokens = 0;  // tokens [0, tokens) move
  // Prefill: stage s's cache, the global index of its first layer, and its block table.
  std::vector<const connector::PagedKvCache*> stage_caches;
  std::vector<uint32_t> stage_first_layers;
  std::vector<std::span<const connector::BlockId>> stage_block_tables;
  std::vector<int> stage_devices;  // CUDA device of each stage's cache; empty: all in host memory
  // Decode: one cache per DCP rank, each holding every layer (global layer l is its layer l) of
  // the tokens handoff::DcpTokenMap{ranks, decode_interleave} gives it, with its block table.
  std::vector<const connector::PagedKvCache*> decode_caches;
  std::vector<std::span<const connector::BlockId>> decode_block_tables;
  std::vector<int> decode_devices;  // CUDA device per rank; empty: all in host memory
  uint32_t decode_interleave = 1;
};

// The request's two sides as src/handoff describes them, and the bytes that move.
// INVALID_ARGUMENT when stages, first layers and tables (or decode caches and tables) do not
// match one to one or the stages do not split the layers in order from layer 0.
struct KvHandoffLayouts {
  handoff::PrefillLayout prefill;
  handoff::DecodeLayout decode;
  uint64_t bytes = 0;
};
Result<KvHandoffLayouts> HandoffLayoutsOf(const KvHandoffRequest& request);

// What a process's handoffs took, for its /metrics: one request's Transfer (every stage into
// every decode rank) in wall-clock seconds and in bytes moved. Read any time from any thread.
struct KvHandoffMetrics {
  Histogram seconds;
  Histogram bytes{Histogram::kSizeBounds, Histogram::Unit::kBytes};
  // kvpool_handoff_seconds and kvpool_handoff_bytes.
  void AppendPrometheus(std::string* out) const;
};

class KvHandoff {
 public:
  virtual ~KvHandoff() = default;
  // Copies the request's KV; returns the bytes moved. INVALID_ARGUMENT for mismatched
  // layouts or block tables too short for `tokens`.
  virtual Result<uint64_t> Transfer(const KvHandoffRequest& request) = 0;
  virtual const char* name() const = 0;
};

// The reference: a memcpy per (token, layer, plane) on the calling thread. Host memory only.
std::unique_ptr<KvHandoff> NewCpuKvHandoff();

// `kvpool replay --gpu`: caches in device memory, moved by src/handoff's HandoffPipeline per
// (stage GPU, decode GPU) — gather kernel, peer copies of at most max_write_bytes, scatter
// kernel — and waited for before Transfer returns. UNAVAILABLE without KVPOOL_CUDA.
Result<std::unique_ptr<KvHandoff>> NewGpuKvHandoff(uint64_t max_write_bytes = uint64_t{8} << 20);

}  // namespace kvpool::engine
