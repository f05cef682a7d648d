// Loads an AgentX ("weka") trace corpus: JSONL, one session tree per line.
//
// Validation is strict, because a replay of a silently mangled trace measures nothing:
// every field the format defines is type-checked; `in` must be a multiple of block_size and
// hash_ids must hold exactly in / block_size ids; hash_id_scope must be "local"; request
// start times must not go backwards within a thread. The first problem found is returned
// as an InvalidArgument Status naming file, line and field, e.g.
//   traces.jsonl:17: request 3: 'in' (1000) is not a multiple of block_size (64)
// Blank lines are ignored. Subagents before the first parent request are dropped and counted.
#pragma once

#include <istream>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trace/load_options.h"
#include "trace/trace.h"

namespace kvpool::trace {

Result<Corpus> LoadAgentXFile(const std::string& path, const LoadOptions& options = {});

// Reads JSONL from `in`; `source` names it in error messages (usually the file name).
Result<Corpus> ParseAgentX(std::istream& in, std::string_view source, const LoadOptions& options = {});

// Parses one line. `where` prefixes error messages ("traces.jsonl:17"). Dropped subagents
// are added to *dropped_subagents.
Result<Trace> ParseAgentXTrace(std::string_view line, std::string_view where, int64_t* dropped_subagents);

}  // namespace kvpool::trace
