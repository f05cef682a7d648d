#include "cli/trace_input.h"

#include <fmt/format.h>

#include <cstdio>

#include "trace/trace_loader.h"

namespace kvpool::cli {

Result<trace::Corpus> LoadTraceInput(std::string_view command, const std::string& path, const std::string& format,
                                     const trace::LoadOptions& options) {
  Result<std::optional<trace::TraceFormat>> chosen = trace::ParseTraceFormatChoice(format);
  if (!chosen.ok()) return chosen.status();
  Result<trace::Corpus> corpus = trace::LoadTraces(path, *chosen, options);
  if (!corpus.ok()) return corpus.status();
  for (const std::string& message : corpus->skipped_invalid)
    fmt::print(stderr, "kvpool {}: skipped {}\n", command, message);
  if (!corpus->skipped_invalid.empty())
    fmt::print(stderr, "kvpool {}: skipped {} invalid trace(s); {} loaded (--strict makes the first one fatal)\n",
               command, corpus->skipped_invalid.size(), corpus->traces.size());
  return corpus;
}

}  // namespace kvpool::cli
