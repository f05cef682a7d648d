#include "engine/session_router.h"

#include <algorithm>

#include "engine/kv_pattern.h"

namespace kvpool::engine {

uint64_t SessionRouter::NextRandom() { return Mix64(rng_state_++); }

int SessionRouter::PowerOfTwo(std::span<const int> candidates, std::span<const double> loads) {
  const int n = static_cast<int>(candidates.size());
  if (n == 1) return candidates[0];
  const int a = static_cast<int>(NextRandom() % n);
  int b = static_cast<int>(NextRandom() % (n - 1));
  if (b >= a) ++b;  // two distinct candidates
  return loads[candidates[b]] < loads[candidates[a]] ? candidates[b] : candidates[a];
}

int SessionRouter::Route(uint64_t session_id, std::span<const int> candidates, std::span<const double> loads) {
  auto it = last_.find(session_id);
  const bool known = it != last_.end();
  if (affinity_ && known && std::find(candidates.begin(), candidates.end(), it->second) != candidates.end()) {
    return it->second;
  }
  const int pick = PowerOfTwo(candidates, loads);
  if (known && it->second != pick) ++moves_;
  last_[session_id] = pick;
  return pick;
}

}  // namespace kvpool::engine
