// LoadTraces: the one entry point from a path to a Corpus, whatever the layout and format.
//
// `path` is a trace file or a folder of them (trace_files.h: JSONL, one-document .json, and
// gzip variants of both). The format is the one asked for, or told from the first record of
// the first file: an object with "requests" is AgentX, one with "input_length" is Mooncake.
// A Mooncake trace is one file. Records stream: a corpus of any size costs the corpus, one
// record's text and its parse tree, never the parse tree of the whole file.
//
// Errors (the CLI's exit code 2): a path that does not exist, a folder with no trace files,
// zero loadable traces, and with LoadOptions::strict the first invalid trace. Otherwise an
// invalid AgentX trace, or an AgentX file that cannot be read to its end, is skipped with one
// message in Corpus::skipped_invalid.
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

// Loads `path` as `format`, or as the detected format when `format` is nullopt.
Result<Corpus> LoadTraces(const std::string& path, std::optional<TraceFormat> format,
                          const LoadOptions& options = {});

}  // namespace kvpool::trace
