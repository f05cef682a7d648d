// The agent-trace data model: a Corpus of Traces, each a main thread of Requests plus the
// Subagents it spawns.
//
// Two file formats load into it (see README.md and /work/shared/agentx-format.md):
//   * AgentX ("weka"): one session tree per record (a JSONL line or a .json file); block ids
//     are local to a trace.
//   * Mooncake FAST'25 JSONL: one request per line, block ids global over the file. It loads
//     as a Corpus with a single Trace (hash_id_scope "global") whose main thread holds every
//     request in file order; think/api times are zero and there are no subagents.
//
// The parent/child relation is positional in the file: a subagent entry between parent
// requests k and k+1 is spawned after turn k and must finish before turn k+1 is sent; after
// the last parent request it runs in the background and gates nothing; before the first
// parent request it is dropped by the loader. The model makes that explicit per subagent
// (spawned_after_turn, gates_turn) so a replayer never re-derives it.
//
// A Corpus is built single-threaded (by a loader or the synthesizer) and is immutable after.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/block_ids.h"

namespace kvpool::trace {

enum class TraceFormat { kAgentX, kMooncake };
std::string_view TraceFormatName(TraceFormat format);  // "agentx", "mooncake"

// JSON "type": "n" (normal) or "s" (streaming, which also records a TTFT).
enum class RequestType { kNormal, kStreaming };

// One model call. JSON keys in brackets.
struct Request {
  double start_time_s = 0;   // [t] absolute trace time, seconds (Mooncake: timestamp / 1000)
  std::string model;         // [model] "" for Mooncake
  int64_t input_tokens = 0;  // [in]
  int64_t output_tokens = 0; // [out]
  // [hash_ids] one id per input block: equal ids at equal positions = shareable prefix.
  // AgentX: one per *full* block, size() == floor(input_tokens / block_size); the partial
  // tail block has no id and is never a hit. Mooncake: ceil(input_tokens / 512), the last
  // block may be partial.
  BlockIds hash_ids;
  std::string stop_reason;   // [stop] "", "tool_use", "end_turn", ...
  // [api_time] server time of the call and [think_time] client delay before it; real files
  // miss either at times (nullopt). A missing api_time counts as 0, so the wait before the
  // next request falls back to the gap between the two recorded start times.
  std::optional<double> api_time_s;
  std::optional<double> think_time_s;
  RequestType type = RequestType::kNormal;  // [type]
  std::optional<double> ttft_s;             // [ttft] streaming requests only, and not always
  // [input_types] / [output_types]: opaque to kvpool, kept as compact JSON text ("" = absent)
  // so the writer reproduces them.
  std::string input_types_json;
  std::string output_types_json;

  double end_time_s() const { return start_time_s + api_time_s.value_or(0); }
  friend bool operator==(const Request&, const Request&) = default;
};

enum class SubagentStatus { kCompleted, kAsyncLaunched };
std::string_view SubagentStatusName(SubagentStatus status);  // "completed", "async_launched"

struct Subagent {
  double spawn_time_s = 0;  // [t]
  std::string agent_id;     // [agent_id]
  std::string subagent_type;  // [subagent_type]
  SubagentStatus status = SubagentStatus::kCompleted;  // [status]
  double duration_ms = 0;   // [duration_ms]
  int64_t total_tokens = 0;  // [total_tokens]
  std::optional<int64_t> tool_use_count;  // [tool_use_count] null when async_launched
  std::vector<std::string> models;  // [models]
  int64_t tool_tokens = 0;   // [tool_tokens]
  int64_t system_tokens = 0; // [system_tokens]
  std::vector<Request> requests;  // [requests] in time order; start times are absolute

  // Index into Trace::requests of the parent turn after which it is spawned.
  size_t spawned_after_turn = 0;
  // The parent turn that may not be sent before this subagent finishes: always
  // spawned_after_turn + 1 when that turn exists; nullopt = background, gates nothing.
  std::optional<size_t> gates_turn;

  bool background() const { return !gates_turn.has_value(); }
  friend bool operator==(const Subagent&, const Subagent&) = default;
};

struct Trace {
  std::string id;                  // [id]
  std::vector<std::string> models; // [models]
  int64_t block_size = 64;         // [block_size]
  std::string hash_id_scope = "local";  // [hash_id_scope] "local" (AgentX) or "global" (Mooncake)
  int64_t tool_tokens = 0;         // [tool_tokens]
  int64_t system_tokens = 0;       // [system_tokens]
  std::string totals_json;         // [totals] opaque, compact JSON text ("" = absent)
  std::vector<Request> requests;   // main thread, in time order
  // Ordered by spawned_after_turn, then by position in the file. Subagents sharing
  // spawned_after_turn form one parallel fan-out.
  std::vector<Subagent> subagents;

  // Largest input + output tokens over all requests, main and subagent: the context a
  // deployment needs to replay this trace.
  int64_t PeakContextTokens() const;
  size_t SubagentRequestCount() const;
  size_t TotalRequestCount() const { return requests.size() + SubagentRequestCount(); }

  // Every request, main and subagent, in time order; ties keep file order (a parent turn
  // before the subagents it spawns).
  std::vector<const Request*> RequestsInTimeOrder() const;

  friend bool operator==(const Trace&, const Trace&) = default;
};

struct Corpus {
  TraceFormat format = TraceFormat::kAgentX;
  std::vector<Trace> traces;
  // Left out by the loader because their peak in+out exceeds LoadOptions::max_context_tokens:
  // whole traces for AgentX, single requests for Mooncake.
  int64_t skipped_over_max_context = 0;
  // Subagent entries with no preceding parent request (dropped, per the format).
  int64_t dropped_subagents = 0;
  // One message per trace left out because it failed validation (or per file that could not
  // be read to its end), naming the record, trace id, request and field. Empty in strict mode.
  std::vector<std::string> skipped_invalid;

  friend bool operator==(const Corpus&, const Corpus&) = default;
};

}  // namespace kvpool::trace
