// Loads AgentX ("weka") traces: one session tree per record (a JSONL line, or a whole .json
// file as the public repository publishes them; see trace_files.h for the layouts).
//
// Real files as recorded (/work/shared/traces/weka-sample/README.md) are accepted as they are:
// `in` need not be a multiple of block_size (hash_ids holds floor(in / block_size) ids; the
// partial tail block has none), `api_time`, `think_time` and a streaming request's `ttft` may
// be missing, `totals` is opaque. Everything the format defines is still type-checked;
// hash_id_scope must be "local" and start times must not go backwards within a thread.
//
// A trace that fails validation is skipped: its message, naming the record, the trace id, the
// request and the field, e.g.
//   traces.jsonl:17: trace 'trace_0042': request 3: 'hash_ids' has 5 ids but floor('in' (400) / block_size (64)) = 6
// is kept in Corpus::skipped_invalid; with LoadOptions::strict the first one is the error.
// Subagents before the first parent request are dropped and counted.
#pragma once

#include <istream>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trace/load_options.h"
#include "trace/trace.h"

namespace kvpool::trace {

// Parses one record. `where` prefixes error messages ("traces.jsonl:17"). Dropped subagents
// are added to *dropped_subagents.
Result<Trace> ParseAgentXTrace(std::string_view record, std::string_view where, int64_t* dropped_subagents);

// Builds a corpus one record at a time, applying LoadOptions (skip or fail on invalid traces,
// skip traces over the context limit).
class AgentXCorpusBuilder {
 public:
  explicit AgentXCorpusBuilder(LoadOptions options);

  // An error only with options.strict (the record's own); otherwise an invalid record is
  // skipped and remembered.
  Status Add(std::string_view record, std::string_view where);
  // A file that could not be read to its end: the traces after the damage are lost, which is
  // one skipped entry (or the error, with options.strict).
  Status AddUnreadable(const Status& read_error);

  // The corpus; INVALID_ARGUMENT naming `source` and the first skipped trace when nothing
  // loadable was added.
  Result<Corpus> Finish(std::string_view source) &&;

 private:
  Status Skip(const Status& problem);

  LoadOptions options_;
  Corpus corpus_;
};

// JSONL from a stream; `source` names it in messages. Used by tests and tools that hold
// text in memory; files go through LoadTraces (trace_loader.h).
Result<Corpus> ParseAgentX(std::istream& in, std::string_view source, const LoadOptions& options = {});

}  // namespace kvpool::trace
