// Hand-written AgentX JSONL for tests: small builders so each test reads as its trace.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

namespace kvpool::trace::testing {

// A request entry with block ids `ids` (block_size 64 unless said otherwise).
inline std::string RequestJson(double t, std::vector<int> ids, int block_size = 64, std::string type = "n",
                               std::string extra = "") {
  return fmt::format(
      R"({{"type":"{}","t":{},"model":"m","in":{},"out":10,"hash_ids":[{}],"stop":"tool_use","api_time":1,)"
      R"("think_time":0.5{}{}}})",
      type, t, ids.size() * block_size, fmt::join(ids, ","), type == "s" ? R"(,"ttft":0.2)" : "", extra);
}

inline std::string SubagentJson(double t, std::string agent_id, std::vector<std::string> requests,
                                std::string status = "completed") {
  return fmt::format(
      R"({{"type":"subagent","t":{},"agent_id":"{}","subagent_type":"Explore","status":"{}","duration_ms":1500,)"
      R"("total_tokens":300,"tool_use_count":{},"models":["m"],"tool_tokens":10,"system_tokens":5,"requests":[{}]}})",
      t, agent_id, status, status == "completed" ? "2" : "null", fmt::join(requests, ","));
}

inline std::string TraceJson(std::string id, std::vector<std::string> entries, int block_size = 64,
                             std::string scope = "local") {
  return fmt::format(
      R"({{"id":"{}","models":["m"],"block_size":{},"hash_id_scope":"{}","tool_tokens":100,"system_tokens":50,)"
      R"("requests":[{}]}})",
      id, block_size, scope, fmt::join(entries, ","));
}

}  // namespace kvpool::trace::testing
