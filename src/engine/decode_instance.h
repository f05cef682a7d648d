// DecodeInstance: one decode instance — its KV admission gate, a paged cache per DCP rank
// holding every layer of that rank's tokens of the requests it decodes (host memory, or a GPU's
// with --gpu; ModelGeometry says which tokens), and continuous batching: each emulated step
// produces one token for every running request; requests that arrive mid-step join the next
// one; a request leaves after its pinned output length.
// Single-threaded (the event loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/deployment_context.h"
#include "engine/gpu_prefix_cache.h"
#include "common/status.h"
#include "engine/kv_cache_memory.h"
#include "engine/in_flight_request.h"
#include "engine/kv_admission_gate.h"

namespace kvpool::engine {

class DecodeInstance {
 public:
  // Fails only when its cache cannot be allocated (a device without room, no CUDA).
  static Result<std::unique_ptr<DecodeInstance>> Create(int index, const DeploymentContext& ctx);
  DecodeInstance(const DecodeInstance&) = delete;
  DecodeInstance& operator=(const DecodeInstance&) = delete;

  // Called when a request produced its last token; its blocks are already freed and its
  // gate tokens not yet released (the deployment does that).
  std::function<void(InFlightRequest*)> on_finished;

  KvAdmissionGate& gate() { return gate_; }
  const KvAdmissionGate& gate() const { return gate_; }
  // The DCP ranks' caches, in rank order, and which tokens each holds.
  uint32_t dcp_ranks() const { return static_cast<uint32_t>(ranks_.size()); }
  KvCacheMemory& rank_memory(uint32_t rank) { return *ranks_[rank].memory; }
  CacheTokens rank_tokens(uint32_t rank) const { return {token_map_, rank}; }
  const handoff::DcpTokenMap& token_map() const { return token_map_; }
  // Gate tokens for a request of `tokens` prompt + output tokens: what its fullest rank needs,
  // in whole blocks, on every rank — so no rank can run out while the gate has room.
  uint64_t GateTokens(uint64_t tokens) const;
  // Block tables (one per rank) for a request's prompt. Cannot fail for requests the gate
  // admitted (GateTokens).
  Result<std::vector<std::vector<connector::BlockId>>> AllocateBlocks(uint64_t tokens);
  void ReleaseBlocks(const std::vector<std::vector<connector::BlockId>>& tables);
  // Starts decoding `r` (its first token already came from prefill).
  void Add(InFlightRequest* r);

  size_t running() const { return running_.size(); }
  uint64_t steps() const { return steps_; }
  // Highest share of the gate's capacity reserved at once.
  double peak_kv_utilisation() const { return peak_utilisation_; }
  // Time-weighted mean share reserved over [from, to] (emulated seconds).
  double MeanKvUtilisation(double from, double to) const;
  // Records the gate's reservation now; called after every admit and release.
  void NoteUtilisation();

 private:
  DecodeInstance(int index, const DeploymentContext& ctx);
  void Step();

  struct Rank {
    std::unique_ptr<KvCacheMemory> memory;
    std::unique_ptr<GpuPrefixCache> blocks;  // a plain allocator: decode never shares blocks
  };
  const int index_;
  const DeploymentContext ctx_;
  const handoff::DcpTokenMap token_map_;
  const uint64_t blocks_per_rank_;
  KvAdmissionGate gate_;  // capacity: every rank's blocks
  std::vector<Rank> ranks_;
  std::vector<InFlightRequest*> running_;
  bool stepping_ = false;
  uint64_t steps_ = 0;
  double peak_utilisation_ = 0;
  std::vector<std::pair<double, double>> utilisation_;  // (time, share reserved from then on)
};

}  // namespace kvpool::engine
