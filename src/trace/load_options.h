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
  // Fail on the first trace that does not validate, instead of skipping it (AgentX; in a
  // Mooncake file every request is part of the one trace, so a bad one always fails the file).
  bool strict = false;
};

}  // namespace kvpool::trace
