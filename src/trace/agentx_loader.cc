#include "trace/agentx_loader.h"

#include <fmt/format.h>

#include "trace/json_fields.h"
#include "trace/trace_files.h"

namespace kvpool::trace {
namespace {

using json_fields::Invalid;
using json_fields::Json;

Result<Request> ParseRequest(const Json& entry, const std::string& type, int64_t block_size,
                             const std::string& where, BlockIdsBuilder& thread_ids) {
  Request r;
  if (type == "s") {
    r.type = RequestType::kStreaming;
  } else if (type == "n") {
    r.type = RequestType::kNormal;
  } else {
    return Invalid(where, fmt::format("'type' must be \"n\", \"s\" or \"subagent\", got \"{}\"", type));
  }
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.start_time_s, json_fields::NonNegativeNumber(entry, "t", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.model, json_fields::String(entry, "model", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.input_tokens, json_fields::NonNegativeInt(entry, "in", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.output_tokens, json_fields::NonNegativeInt(entry, "out", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.stop_reason, json_fields::String(entry, "stop", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.api_time_s, json_fields::OptionalNonNegativeNumber(entry, "api_time", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.think_time_s, json_fields::OptionalNonNegativeNumber(entry, "think_time", where));
  // Streaming requests usually record a TTFT, but real files omit it where they omit api_time.
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.ttft_s, json_fields::OptionalNonNegativeNumber(entry, "ttft", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(std::vector<uint64_t> ids, json_fields::IdList(entry, "hash_ids", where));
  // One id per full block; a partial tail block has none.
  const int64_t blocks = r.input_tokens / block_size;
  if (static_cast<int64_t>(ids.size()) != blocks)
    return Invalid(where, fmt::format("'hash_ids' has {} ids but floor('in' ({}) / block_size ({})) = {}", ids.size(),
                                      r.input_tokens, block_size, blocks));
  r.hash_ids = thread_ids.Share(ids);
  r.input_types_json = json_fields::OpaqueText(entry, "input_types");
  r.output_types_json = json_fields::OpaqueText(entry, "output_types");
  return r;
}

// Start times never go backwards within one thread (main or subagent).
Status CheckTimeOrder(const Request& r, const std::vector<Request>& thread, const std::string& where) {
  if (!thread.empty() && r.start_time_s < thread.back().start_time_s)
    return Invalid(where, fmt::format("'t' ({}) is earlier than the previous request's ({}); requests must be in "
                                      "time order",
                                      r.start_time_s, thread.back().start_time_s));
  return Status::Ok();
}

Result<Subagent> ParseSubagent(const Json& entry, int64_t block_size, const std::string& where) {
  Subagent s;
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.spawn_time_s, json_fields::NonNegativeNumber(entry, "t", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.agent_id, json_fields::String(entry, "agent_id", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.subagent_type, json_fields::String(entry, "subagent_type", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(std::string status, json_fields::String(entry, "status", where));
  if (status == "completed") {
    s.status = SubagentStatus::kCompleted;
  } else if (status == "async_launched") {
    s.status = SubagentStatus::kAsyncLaunched;
  } else {
    return Invalid(where, fmt::format("'status' must be \"completed\" or \"async_launched\", got \"{}\"", status));
  }
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.duration_ms, json_fields::NonNegativeNumber(entry, "duration_ms", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.total_tokens, json_fields::NonNegativeInt(entry, "total_tokens", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.tool_use_count, json_fields::OptionalNonNegativeInt(entry, "tool_use_count", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.models, json_fields::StringList(entry, "models", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.tool_tokens, json_fields::NonNegativeInt(entry, "tool_tokens", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(s.system_tokens, json_fields::NonNegativeInt(entry, "system_tokens", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* requests, json_fields::Required(entry, "requests", where));
  if (!requests->is_array())
    return Invalid(where, fmt::format("'requests' must be a list, got {}", json_fields::Show(*requests)));
  BlockIdsBuilder ids;
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string inner = fmt::format("{} (subagent) request {}", where, i);
    const Json& e = (*requests)[i];
    if (!e.is_object()) return Invalid(inner, fmt::format("must be an object, got {}", json_fields::Show(e)));
    KVPOOL_TRACE_ASSIGN_OR_RETURN(std::string type, json_fields::String(e, "type", inner));
    if (type == "subagent") return Invalid(inner, "nested subagents are not supported");
    KVPOOL_TRACE_ASSIGN_OR_RETURN(Request r, ParseRequest(e, type, block_size, inner, ids));
    KVPOOL_RETURN_IF_ERROR(CheckTimeOrder(r, s.requests, inner));
    s.requests.push_back(std::move(r));
  }
  return s;
}

}  // namespace

Result<Trace> ParseAgentXTrace(std::string_view record, std::string_view record_where, int64_t* dropped_subagents) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(json_fields::Json doc, json_fields::ParseRecord(record, record_where));
  if (!doc.is_object())
    return Invalid(record_where, fmt::format("a trace must be a JSON object, got {}", json_fields::Show(doc)));
  Trace trace;
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.id, json_fields::String(doc, "id", record_where));
  // From here on, messages name the trace too.
  const std::string where = fmt::format("{}: trace '{}'", record_where, trace.id);
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.models, json_fields::StringList(doc, "models", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.block_size, json_fields::NonNegativeInt(doc, "block_size", where));
  if (trace.block_size == 0) return Invalid(where, "'block_size' must be positive, got 0");
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.hash_id_scope, json_fields::String(doc, "hash_id_scope", where));
  if (trace.hash_id_scope != "local")
    return Invalid(where, fmt::format("'hash_id_scope' is \"{}\"; only \"local\" (block ids scoped to one trace) "
                                      "is supported",
                                      trace.hash_id_scope));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.tool_tokens, json_fields::NonNegativeInt(doc, "tool_tokens", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(trace.system_tokens, json_fields::NonNegativeInt(doc, "system_tokens", where));
  trace.totals_json = json_fields::OpaqueText(doc, "totals");
  KVPOOL_TRACE_ASSIGN_OR_RETURN(const Json* entries, json_fields::Required(doc, "requests", where));
  if (!entries->is_array())
    return Invalid(where, fmt::format("'requests' must be a list, got {}", json_fields::Show(*entries)));

  BlockIdsBuilder main_ids;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string entry_where = fmt::format("{}: request {}", where, i);
    const Json& e = (*entries)[i];
    if (!e.is_object()) return Invalid(entry_where, fmt::format("must be an object, got {}", json_fields::Show(e)));
    KVPOOL_TRACE_ASSIGN_OR_RETURN(std::string type, json_fields::String(e, "type", entry_where));
    if (type == "subagent") {
      KVPOOL_TRACE_ASSIGN_OR_RETURN(Subagent s, ParseSubagent(e, trace.block_size, entry_where));
      if (trace.requests.empty()) {  // no parent turn spawns it: dropped, per the format
        if (dropped_subagents) ++*dropped_subagents;
        continue;
      }
      s.spawned_after_turn = trace.requests.size() - 1;
      trace.subagents.push_back(std::move(s));
      continue;
    }
    KVPOOL_TRACE_ASSIGN_OR_RETURN(Request r, ParseRequest(e, type, trace.block_size, entry_where, main_ids));
    KVPOOL_RETURN_IF_ERROR(CheckTimeOrder(r, trace.requests, entry_where));
    trace.requests.push_back(std::move(r));
  }
  if (trace.requests.empty()) return Invalid(where, "no main-thread requests");
  for (Subagent& s : trace.subagents) {
    if (s.spawned_after_turn + 1 < trace.requests.size()) s.gates_turn = s.spawned_after_turn + 1;
  }
  return trace;
}

AgentXCorpusBuilder::AgentXCorpusBuilder(LoadOptions options) : options_(options) {
  corpus_.format = TraceFormat::kAgentX;
}

Status AgentXCorpusBuilder::Skip(const Status& problem) {
  if (options_.strict) return problem;
  corpus_.skipped_invalid.push_back(problem.message());
  return Status::Ok();
}

Status AgentXCorpusBuilder::Add(std::string_view record, std::string_view where) {
  Result<Trace> trace = ParseAgentXTrace(record, where, &corpus_.dropped_subagents);
  if (!trace.ok()) return Skip(trace.status());
  if (options_.max_context_tokens > 0 && trace->PeakContextTokens() > options_.max_context_tokens) {
    ++corpus_.skipped_over_max_context;
    return Status::Ok();
  }
  corpus_.traces.push_back(std::move(trace).value());
  return Status::Ok();
}

Status AgentXCorpusBuilder::AddUnreadable(const Status& read_error) { return Skip(read_error); }

Result<Corpus> AgentXCorpusBuilder::Finish(std::string_view source) && {
  if (corpus_.traces.empty() && corpus_.skipped_over_max_context == 0) {
    if (corpus_.skipped_invalid.empty()) return InvalidArgument(fmt::format("{}: no traces", source));
    return InvalidArgument(fmt::format("{}: no loadable traces: {} skipped as invalid, the first: {}", source,
                                       corpus_.skipped_invalid.size(), corpus_.skipped_invalid.front()));
  }
  return std::move(corpus_);
}

Result<Corpus> ParseAgentX(std::istream& in, std::string_view source, const LoadOptions& options) {
  AgentXCorpusBuilder builder(options);
  const auto add = [&](std::string_view record, const std::string& where) { return builder.Add(record, where); };
  KVPOOL_RETURN_IF_ERROR(ForEachLineRecord(LinesOf(in, source), source, add));
  return std::move(builder).Finish(source);
}

}  // namespace kvpool::trace
