#include "trace/agentx_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

namespace kvpool::trace {
namespace {

// Written by hand rather than through a JSON DOM: a trace holds ~10^5-10^6 block ids, and
// this keeps key order fixed and the cost to one pass. Every function appends to `out`.
template <typename... Args>
void Put(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

// Invalid UTF-8 (only possible in a hand-built Trace) is replaced rather than thrown on.
void Str(std::string& out, std::string_view s) {
  Put(out, "{}", nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void StrList(std::string& out, const std::vector<std::string>& items) {
  Put(out, "[");
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) Put(out, ",");
    Str(out, items[i]);
  }
  Put(out, "]");
}

// fmt's "{}" prints a double in its shortest form that reads back to the same value.
void Num(std::string& out, double d) { Put(out, "{}", d); }

void WriteRequest(std::string& out, const Request& r) {
  Put(out, "{{\"type\":\"{}\",\"t\":", r.type == RequestType::kStreaming ? "s" : "n");
  Num(out, r.start_time_s);
  Put(out, ",\"model\":");
  Str(out, r.model);
  Put(out, ",\"in\":{},\"out\":{},\"hash_ids\":[", r.input_tokens, r.output_tokens);
  // The bulk of every line: append digits directly rather than through a format string.
  const auto ids = r.hash_ids.view();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    const fmt::format_int digits(ids[i]);
    out.append(digits.data(), digits.size());
  }
  out.push_back(']');
  if (!r.input_types_json.empty()) Put(out, ",\"input_types\":{}", r.input_types_json);
  if (!r.output_types_json.empty()) Put(out, ",\"output_types\":{}", r.output_types_json);
  Put(out, ",\"stop\":");
  Str(out, r.stop_reason);
  // Fields a real file may lack are written only when present, so a file reads back as it was.
  for (const auto& [key, value] : {std::pair{"api_time", r.api_time_s}, std::pair{"think_time", r.think_time_s},
                                   std::pair{"ttft", r.ttft_s}}) {
    if (!value) continue;
    Put(out, ",\"{}\":", key);
    Num(out, *value);
  }
  Put(out, "}}");
}

void WriteSubagent(std::string& out, const Subagent& s) {
  Put(out, "{{\"type\":\"subagent\",\"t\":");
  Num(out, s.spawn_time_s);
  Put(out, ",\"agent_id\":");
  Str(out, s.agent_id);
  Put(out, ",\"subagent_type\":");
  Str(out, s.subagent_type);
  Put(out, ",\"status\":\"{}\",\"duration_ms\":", SubagentStatusName(s.status));
  Num(out, s.duration_ms);
  Put(out, ",\"total_tokens\":{},\"tool_use_count\":", s.total_tokens);
  if (s.tool_use_count) {
    Put(out, "{}", *s.tool_use_count);
  } else {
    Put(out, "null");
  }
  Put(out, ",\"models\":");
  StrList(out, s.models);
  Put(out, ",\"tool_tokens\":{},\"system_tokens\":{},\"requests\":[", s.tool_tokens, s.system_tokens);
  for (size_t i = 0; i < s.requests.size(); ++i) {
    if (i) Put(out, ",");
    WriteRequest(out, s.requests[i]);
  }
  Put(out, "]}}");
}

}  // namespace

std::string AgentXTraceLine(const Trace& trace) {
  std::string out;
  Put(out, "{{\"id\":");
  Str(out, trace.id);
  Put(out, ",\"models\":");
  StrList(out, trace.models);
  Put(out, ",\"block_size\":{},\"hash_id_scope\":", trace.block_size);
  Str(out, trace.hash_id_scope);
  Put(out, ",\"tool_tokens\":{},\"system_tokens\":{}", trace.tool_tokens, trace.system_tokens);
  if (!trace.totals_json.empty()) Put(out, ",\"totals\":{}", trace.totals_json);
  Put(out, ",\"requests\":[");
  size_t next_subagent = 0;
  for (size_t turn = 0; turn < trace.requests.size(); ++turn) {
    if (turn) Put(out, ",");
    WriteRequest(out, trace.requests[turn]);
    for (; next_subagent < trace.subagents.size() && trace.subagents[next_subagent].spawned_after_turn == turn;
         ++next_subagent) {
      Put(out, ",");
      WriteSubagent(out, trace.subagents[next_subagent]);
    }
  }
  Put(out, "]}}");
  return out;
}

Status WriteAgentX(const Corpus& corpus, std::ostream& out) {
  if (corpus.format != TraceFormat::kAgentX)
    return InvalidArgument("only an AgentX corpus can be written in the AgentX format");
  for (const Trace& trace : corpus.traces) {
    const std::string line = AgentXTraceLine(trace);
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
    out.put('\n');
    if (!out) return Unavailable(fmt::format("write failed: {}", std::strerror(errno)));
  }
  return Status::Ok();
}

Status WriteAgentXFile(const Corpus& corpus, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return NotFound(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  Status s = WriteAgentX(corpus, out);
  if (!s.ok()) return Unavailable(fmt::format("{}: {}", path, s.message()));
  out.close();
  if (!out) return Unavailable(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
  return Status::Ok();
}

}  // namespace kvpool::trace
