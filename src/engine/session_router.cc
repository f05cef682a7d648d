#include "engine/session_router.h"

#include "engine/kv_pattern.h"

namespace kvpool::engine {

uint64_t SessionRouter::NextRandom() { return Mix64(rng_state_++); }

int SessionRouter::Route(uint64_t session_id, std::span<const double> loads) {
  if (auto it = affinity_.find(session_id); it != affinity_.end()) return it->second;
  int pick = 0;
  if (instances_ > 1) {
    const int a = static_cast<int>(NextRandom() % instances_);
    int b = static_cast<int>(NextRandom() % (instances_ - 1));
    if (b >= a) ++b;  // two distinct candidates
    pick = loads[b] < loads[a] ? b : a;
  }
  affinity_.emplace(session_id, pick);
  return pick;
}

}  // namespace kvpool::engine
