// The trace input of `kvpool trace stats` and `kvpool replay --trace`: one way to load a path,
// report what was skipped, and fail.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "trace/load_options.h"
#include "trace/trace.h"

namespace kvpool::cli {

// The exit status of a command whose trace input cannot be used: a missing path, a folder
// without trace files, zero loadable traces, or (with --strict) an invalid trace.
inline constexpr int kUnusableTraceInputExit = 2;

// Loads `path` (`format`: agentx, mooncake or auto) and prints one line to stderr per
// skipped trace ("kvpool COMMAND: skipped FILE:LINE: trace 'ID': request N: ..."), then how
// many. An error is the reason the input is unusable.
Result<trace::Corpus> LoadTraceInput(std::string_view command, const std::string& path, const std::string& format,
                                     const trace::LoadOptions& options);

}  // namespace kvpool::cli
