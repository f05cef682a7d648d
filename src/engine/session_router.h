// SessionRouter: picks the prefill instance for a request among its group's instances.
//
// Two policies, both deterministic for a seed and single-threaded:
//  * session affinity (the single-server replay's): a session's requests go to the instance
//    that served its first one, where its prefix is in the GPU cache; a new session goes to
//    the less loaded of two candidates drawn at random (power of two choices: near-best
//    balance without a global scan, and no herd onto one momentarily idle instance);
//  * power of two choices for every request (the published four-server router): a turn
//    lands wherever load sends it, so its history is in that instance's GPU cache only as
//    far as its last visit there went, and the pool must supply the rest.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

namespace kvpool::engine {

class SessionRouter {
 public:
  SessionRouter(uint64_t seed, bool session_affinity) : rng_state_(seed), affinity_(session_affinity) {}

  // `candidates`: the instances this request may use (REQUIRES: not empty); `loads[i]` is
  // instance i's current load (any unit; lower is better), indexed by instance.
  int Route(uint64_t session_id, std::span<const int> candidates, std::span<const double> loads);
  size_t sessions() const { return last_.size(); }
  // Requests sent to another instance than their session's previous request.
  uint64_t moves() const { return moves_; }

 private:
  uint64_t NextRandom();
  int PowerOfTwo(std::span<const int> candidates, std::span<const double> loads);
  uint64_t rng_state_;
  const bool affinity_;
  std::unordered_map<uint64_t, int> last_;  // session -> instance of its previous request
  uint64_t moves_ = 0;
};

}  // namespace kvpool::engine
