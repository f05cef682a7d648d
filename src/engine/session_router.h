// SessionRouter: picks the prefill instance for a request.
//
// Session-aware: a session's requests stick to the instance that served its first one, where
// its prefix is in the GPU cache. A new session goes to the less loaded of two instances
// drawn at random (power of two choices: near-best balance without a global scan, and no
// herd onto one momentarily idle instance). Deterministic for a seed. Single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

namespace kvpool::engine {

class SessionRouter {
 public:
  SessionRouter(int instances, uint64_t seed) : instances_(instances), rng_state_(seed) {}

  // `loads[i]` is instance i's current load (any unit; lower is better). REQUIRES:
  // loads.size() == instances.
  int Route(uint64_t session_id, std::span<const double> loads);
  // Forgets a finished session.
  void EndSession(uint64_t session_id) { affinity_.erase(session_id); }
  size_t sessions() const { return affinity_.size(); }

 private:
  uint64_t NextRandom();
  const int instances_;
  uint64_t rng_state_;
  std::unordered_map<uint64_t, int> affinity_;
};

}  // namespace kvpool::engine
