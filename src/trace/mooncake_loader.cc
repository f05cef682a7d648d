#include "trace/mooncake_loader.h"

#include <fmt/format.h>

#include "trace/json_fields.h"
#include "trace/trace_files.h"

namespace kvpool::trace {
namespace {

using json_fields::Invalid;

Result<Request> ParseMooncakeRequest(std::string_view line, const std::string& where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(json_fields::Json doc, json_fields::ParseRecord(line, where));
  if (!doc.is_object())
    return Invalid(where, fmt::format("a request must be a JSON object, got {}", json_fields::Show(doc)));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(int64_t timestamp_ms, json_fields::NonNegativeInt(doc, "timestamp", where));
  Request r;
  r.start_time_s = static_cast<double>(timestamp_ms) / 1000.0;
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.input_tokens, json_fields::NonNegativeInt(doc, "input_length", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(r.output_tokens, json_fields::NonNegativeInt(doc, "output_length", where));
  KVPOOL_TRACE_ASSIGN_OR_RETURN(std::vector<uint64_t> ids, json_fields::IdList(doc, "hash_ids", where));
  const int64_t blocks = (r.input_tokens + kMooncakeBlockSize - 1) / kMooncakeBlockSize;
  if (static_cast<int64_t>(ids.size()) != blocks)
    return Invalid(where, fmt::format("'hash_ids' has {} ids but 'input_length' ({}) needs ceil({} / {}) = {}",
                                      ids.size(), r.input_tokens, r.input_tokens, kMooncakeBlockSize, blocks));
  r.hash_ids = BlockIds(std::move(ids));
  return r;
}

}  // namespace

MooncakeTraceBuilder::MooncakeTraceBuilder(std::string_view source, LoadOptions options) : options_(options) {
  corpus_.format = TraceFormat::kMooncake;
  trace_.id = std::string(source);
  trace_.block_size = kMooncakeBlockSize;
  trace_.hash_id_scope = "global";
}

Status MooncakeTraceBuilder::Add(std::string_view record, const std::string& where) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(Request r, ParseMooncakeRequest(record, where));
  if (r.start_time_s < last_start_s_)
    return Invalid(where, fmt::format("'timestamp' ({}) is earlier than the previous request's ({}); requests "
                                      "must be in time order",
                                      r.start_time_s * 1000, last_start_s_ * 1000));
  last_start_s_ = r.start_time_s;
  if (options_.max_context_tokens > 0 && r.input_tokens + r.output_tokens > options_.max_context_tokens) {
    ++corpus_.skipped_over_max_context;
    return Status::Ok();
  }
  trace_.requests.push_back(std::move(r));
  return Status::Ok();
}

Result<Corpus> MooncakeTraceBuilder::Finish() && {
  if (trace_.requests.empty() && corpus_.skipped_over_max_context == 0)
    return InvalidArgument(fmt::format("{}: no requests", trace_.id));
  corpus_.traces.push_back(std::move(trace_));
  return std::move(corpus_);
}

Result<Corpus> ParseMooncake(std::istream& in, std::string_view source, const LoadOptions& options) {
  MooncakeTraceBuilder builder(source, options);
  const auto add = [&](std::string_view record, const std::string& where) { return builder.Add(record, where); };
  KVPOOL_RETURN_IF_ERROR(ForEachLineRecord(LinesOf(in, source), source, add));
  return std::move(builder).Finish();
}

}  // namespace kvpool::trace
