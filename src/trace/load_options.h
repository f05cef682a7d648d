// Options shared by the trace loaders.
#pragma once

#include <cstdint>

namespace kvpool::trace {

struct LoadOptions {
  // Skip what a deployment with this context length cannot replay: AgentX traces whose peak
  // input+output (over main and subagent requests) exceeds it, or Mooncake requests whose
  // input+output does. Skipped ones are still validated, and are counted in
  // Corpus::skipped_over_max_context. 0 = no limit.
  int64_t max_context_tokens = 0;
};

}  // namespace kvpool::trace
