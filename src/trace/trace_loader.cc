#include "trace/trace_loader.h"

#include <fmt/format.h>

#include "trace/agentx_loader.h"
#include "trace/json_fields.h"
#include "trace/mooncake_loader.h"
#include "trace/trace_files.h"

namespace kvpool::trace {
namespace {

Result<TraceFormat> DetectTraceFormat(const TraceFile& file) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(FirstTraceRecord record, FirstRecord(file));
  const std::string& where = record.where;
  KVPOOL_TRACE_ASSIGN_OR_RETURN(json_fields::Json doc, json_fields::ParseRecord(record.text, where));
  if (doc.is_object() && doc.contains("requests")) return TraceFormat::kAgentX;
  if (doc.is_object() && doc.contains("input_length")) return TraceFormat::kMooncake;
  return json_fields::Invalid(where, "cannot tell the trace format: the first record has neither 'requests' "
                                     "(AgentX) nor 'input_length' (Mooncake); pass the format explicitly");
}

Result<Corpus> LoadMooncake(const std::string& path, const std::vector<TraceFile>& files, const LoadOptions& options) {
  if (files.size() != 1)
    return InvalidArgument(fmt::format("'{}': a Mooncake trace is one file (its block ids are global to the file), "
                                       "found {} files",
                                       path, files.size()));
  MooncakeTraceBuilder builder(files[0].path, options);
  KVPOOL_RETURN_IF_ERROR(ForEachRecord(
      files[0], [&](std::string_view record, const std::string& where) { return builder.Add(record, where); }));
  return std::move(builder).Finish();
}

Result<Corpus> LoadAgentX(const std::string& path, const std::vector<TraceFile>& files, const LoadOptions& options) {
  AgentXCorpusBuilder builder(options);
  const auto add = [&](std::string_view record, const std::string& where) { return builder.Add(record, where); };
  for (const TraceFile& file : files) {
    // Without strict, `add` never fails: an error is the file's own damage, one skipped entry.
    if (Status s = ForEachRecord(file, add); !s.ok()) KVPOOL_RETURN_IF_ERROR(builder.AddUnreadable(s));
  }
  return std::move(builder).Finish(path);
}

}  // namespace

Result<std::optional<TraceFormat>> ParseTraceFormatChoice(std::string_view name) {
  if (name == "agentx") return std::optional<TraceFormat>(TraceFormat::kAgentX);
  if (name == "mooncake") return std::optional<TraceFormat>(TraceFormat::kMooncake);
  if (name == "auto") return std::optional<TraceFormat>();
  return InvalidArgument(fmt::format("unknown trace format '{}': expected agentx, mooncake or auto", name));
}

Result<Corpus> LoadTraces(const std::string& path, std::optional<TraceFormat> format, const LoadOptions& options) {
  KVPOOL_TRACE_ASSIGN_OR_RETURN(std::vector<TraceFile> files, ListTraceFiles(path));
  if (!format) {
    KVPOOL_TRACE_ASSIGN_OR_RETURN(format, DetectTraceFormat(files.front()));
  }
  return *format == TraceFormat::kAgentX ? LoadAgentX(path, files, options) : LoadMooncake(path, files, options);
}

}  // namespace kvpool::trace
