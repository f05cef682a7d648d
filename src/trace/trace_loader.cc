#include "trace/trace_loader.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "trace/agentx_loader.h"
#include "trace/json_fields.h"
#include "trace/mooncake_loader.h"

namespace kvpool::trace {

Result<std::optional<TraceFormat>> ParseTraceFormatChoice(std::string_view name) {
  if (name == "agentx") return std::optional<TraceFormat>(TraceFormat::kAgentX);
  if (name == "mooncake") return std::optional<TraceFormat>(TraceFormat::kMooncake);
  if (name == "auto") return std::optional<TraceFormat>();
  return InvalidArgument(fmt::format("unknown trace format '{}': expected agentx, mooncake or auto", name));
}

Result<TraceFormat> DetectTraceFormat(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::string line;
  for (int64_t line_number = 1; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, line_number);
    KVPOOL_TRACE_ASSIGN_OR_RETURN(json_fields::Json doc, json_fields::ParseLine(line, where));
    if (doc.is_object() && doc.contains("requests")) return TraceFormat::kAgentX;
    if (doc.is_object() && doc.contains("input_length")) return TraceFormat::kMooncake;
    return json_fields::Invalid(where, "cannot tell the trace format: the first record has neither 'requests' "
                                       "(AgentX) nor 'input_length' (Mooncake); pass the format explicitly");
  }
  return InvalidArgument(fmt::format("{}: no records", path));
}

Result<Corpus> LoadTraceFile(const std::string& path, std::optional<TraceFormat> format, const LoadOptions& options) {
  if (!format) {
    KVPOOL_TRACE_ASSIGN_OR_RETURN(format, DetectTraceFormat(path));
  }
  return *format == TraceFormat::kAgentX ? LoadAgentXFile(path, options) : LoadMooncakeFile(path, options);
}

}  // namespace kvpool::trace
