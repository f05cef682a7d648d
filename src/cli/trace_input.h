// The trace input of `kvpool trace stats`, `kvpool replay` and `kvpool plan`: one way to load a
// path (or synthesize a corpus), report what was skipped, and fail.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
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

// Where a replay or a plan takes its sessions from: a trace path, or a synthetic corpus.
struct CorpusSource {
  std::string trace_file;
  std::string format = "auto";
  bool strict = false;
  int synth_traces = 0;
  double synth_turn_scale = 1.0;
};

// --trace (and, with `trace_positional`, a positional TRACE), --synth, --format, --strict,
// --synth-turn-scale: exactly one of the trace and --synth.
void AddCorpusSourceFlags(CLI::App* cmd, CorpusSource& source, bool trace_positional);

struct LoadedCorpus {
  trace::Corpus corpus;
  std::string description;  // the path, or what was synthesized
};

// The corpus `source` names (synthesized from `seed`); traces over `max_context_tokens` are
// left out. An error, printed by the caller, means exit kUnusableTraceInputExit.
Result<LoadedCorpus> LoadCorpusSource(std::string_view command, const CorpusSource& source, uint64_t seed,
                                      int64_t max_context_tokens);

}  // namespace kvpool::cli
