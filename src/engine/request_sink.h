// RequestSink: what a trace driver (src/replay) feeds requests to — the emulated deployment,
// or the capacity planner's model of its caches (replay/cache_model.h), so both see the same
// lane semantics from one driver.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "connector/chunk_keys.h"
#include "engine/model_geometry.h"
#include "engine/request_record.h"

namespace kvpool::engine {

struct DeploymentRequest {
  uint64_t session_id = 0;
  std::vector<connector::TokenId> tokens;  // the prompt; REQUIRES: not empty
  uint64_t output_tokens = 1;  // what the request generates (the trace's; only it knows)
  bool counted = true;
  // The most it may generate, as its client asked (max_tokens), and so what the KV admission
  // gate reserves for its output. 0: output_tokens (a client that asks for exactly the recorded
  // length and forces it, as the published AgentX harness does). REQUIRES: 0 or >= output_tokens.
  uint64_t max_tokens = 0;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Starts serving `request`; `on_done` gets its record when it finished or failed.
  virtual void Submit(DeploymentRequest request, std::function<void(const RequestRecord&)> on_done) = 0;
  virtual const ModelGeometry& geometry() const = 0;
  virtual bool uses_pool() const = 0;
  // A router's hints about a session whose latest prompt was `tokens` (issue 18): it waits,
  // its chunks are kept over others' for `ttl`, and its next turn is expected in `reuse_in`
  // (0: one is queued already); or it ended (first to evict).
  virtual void RetainSession(std::span<const connector::TokenId> tokens, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds reuse_in) = 0;
  virtual void ReleaseSession(std::span<const connector::TokenId> tokens) = 0;
  // A router's view that a thread's new prompt no longer continues its `previous` one from
  // token `first_changed` on (auto-compaction replaced the conversation, or a turn after a long
  // pause diverged): the chunks of `previous` from there on are no longer its future prefix, and
  // rank first to evict (supersession, issue 44).
  virtual void SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) = 0;
};

}  // namespace kvpool::engine
