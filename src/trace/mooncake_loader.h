// Loads a Mooncake FAST'25 request trace: JSONL, one request per line,
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

Result<Corpus> LoadMooncakeFile(const std::string& path, const LoadOptions& options = {});
Result<Corpus> ParseMooncake(std::istream& in, std::string_view source, const LoadOptions& options = {});

}  // namespace kvpool::trace
