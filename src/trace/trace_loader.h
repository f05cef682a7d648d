// Loads a trace file of either format, telling them apart by the first record when asked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trace/load_options.h"
#include "trace/trace.h"

namespace kvpool::trace {

// "agentx" | "mooncake" -> that format; "auto" -> nullopt (detect). Anything else is an error.
Result<std::optional<TraceFormat>> ParseTraceFormatChoice(std::string_view name);

// The format of the file's first non-blank line: an object with "requests" is AgentX, one
// with "input_length" is Mooncake.
Result<TraceFormat> DetectTraceFormat(const std::string& path);

// Loads `path` as `format`, or as the detected format when `format` is nullopt.
Result<Corpus> LoadTraceFile(const std::string& path, std::optional<TraceFormat> format,
                             const LoadOptions& options = {});

}  // namespace kvpool::trace
