#include "trace/trace.h"

#include <algorithm>

namespace kvpool::trace {

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAgentX: return "agentx";
    case TraceFormat::kMooncake: return "mooncake";
  }
  return "unknown";
}

std::string_view SubagentStatusName(SubagentStatus status) {
  switch (status) {
    case SubagentStatus::kCompleted: return "completed";
    case SubagentStatus::kAsyncLaunched: return "async_launched";
  }
  return "unknown";
}

int64_t Trace::PeakContextTokens() const {
  int64_t peak = 0;
  for (const Request& r : requests) peak = std::max(peak, r.input_tokens + r.output_tokens);
  for (const Subagent& s : subagents)
    for (const Request& r : s.requests) peak = std::max(peak, r.input_tokens + r.output_tokens);
  return peak;
}

size_t Trace::SubagentRequestCount() const {
  size_t n = 0;
  for (const Subagent& s : subagents) n += s.requests.size();
  return n;
}

std::vector<const Request*> Trace::RequestsInTimeOrder() const {
  // File order first: turn k, then the subagents spawned after it, then turn k+1.
  std::vector<const Request*> order;
  order.reserve(TotalRequestCount());
  size_t next_subagent = 0;
  for (size_t turn = 0; turn < requests.size(); ++turn) {
    order.push_back(&requests[turn]);
    for (; next_subagent < subagents.size() && subagents[next_subagent].spawned_after_turn == turn; ++next_subagent)
      for (const Request& r : subagents[next_subagent].requests) order.push_back(&r);
  }
  for (; next_subagent < subagents.size(); ++next_subagent)  // only if the invariant is broken
    for (const Request& r : subagents[next_subagent].requests) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const Request* a, const Request* b) { return a->start_time_s < b->start_time_s; });
  return order;
}

}  // namespace kvpool::trace
