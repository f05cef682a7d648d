// Loads a Mooncake FAST'25 request trace: JSONL (plain or gzip), one request per line,
//   {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]}
// Blocks are 512 tokens and ids are global over the file; the last block may be partial, so
// hash_ids must hold exactly ceil(input_length / 512) ids. Timestamps must not decrease.
//
// The result is a Corpus (format kMooncake) with one Trace, id = the source name,
// hash_id_scope "global", block_size 512, whose main thread holds every request in file
// order with start_time_s = timestamp / 1000; model, stop, api/think times are empty/zero.
// Replay it open-loop by start time.
#pragma once

#include <istream>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trace/load_options.h"
#include "trace/trace.h"

namespace kvpool::trace {

inline constexpr int64_t kMooncakeBlockSize = 512;

// Builds the one trace of a file a record at a time. The file is one trace, so any bad
// record is the file's error (there is nothing to skip it to).
class MooncakeTraceBuilder {
 public:
  MooncakeTraceBuilder(std::string_view source, LoadOptions options);
  Status Add(std::string_view record, const std::string& where);
  // INVALID_ARGUMENT when no request was added.
  Result<Corpus> Finish() &&;

 private:
  LoadOptions options_;
  Corpus corpus_;
  Trace trace_;
  double last_start_s_ = 0;
};

// JSONL from a stream; `source` names it in messages and becomes the trace id. Files go
// through LoadTraces (trace_loader.h).
Result<Corpus> ParseMooncake(std::istream& in, std::string_view source, const LoadOptions& options = {});

}  // namespace kvpool::trace
