// Where trace records come from: a path names one trace file or a folder of them, and each
// file holds its records one per line or as one JSON document.
//
// Layouts (any of them gzip-compressed, with ".gz" appended to the name):
//   * "*.json": one JSON document, one record (the public AgentX repository's
//     trace_NNNN.json files, pretty-printed or not);
//   * anything else ("*.jsonl", ...): JSON Lines, one record per non-blank line (the AgentX
//     corpus, Mooncake request traces).
// A folder contributes its *.json, *.jsonl, *.json.gz and *.jsonl.gz files (not its
// subfolders), in name order; other files (a README) are ignored.
#pragma once

#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvpool::trace {

enum class RecordLayout { kJsonLines, kJsonDocument };

struct TraceFile {
  std::string path;
  RecordLayout layout = RecordLayout::kJsonLines;
};

// The layout a file name implies.
RecordLayout LayoutOfFileName(std::string_view name);

// The trace files `path` names. NOT_FOUND when it does not exist; INVALID_ARGUMENT for a
// folder without trace files.
Result<std::vector<TraceFile>> ListTraceFiles(const std::string& path);

// Calls `visit(text, where)` for each record of `file`, in order; `where` names the record in
// messages ("traces.jsonl:17", or the path for a document). Stops at, and returns, the first
// error from `visit`; a file that cannot be read to its end is UNAVAILABLE (the records
// before the damage were visited).
using RecordVisitor = std::function<Status(std::string_view text, const std::string& where)>;
Status ForEachRecord(const TraceFile& file, const RecordVisitor& visit);

// The JSON Lines walk itself, over any source of lines: `next_line` yields the next line
// (false at the end, an error when the source cannot be read further); blank lines are
// passed over and `where` is "SOURCE:LINE". ForEachRecord runs it on a file; LinesOf makes a
// source of a stream (text held in memory).
using NextLine = std::function<Result<bool>(std::string* line)>;
Status ForEachLineRecord(const NextLine& next_line, std::string_view source, const RecordVisitor& visit);
NextLine LinesOf(std::istream& in, std::string_view source);

// The first record of `file` (for telling its format), or an error when it has none.
struct FirstTraceRecord {
  std::string text;
  std::string where;
};
Result<FirstTraceRecord> FirstRecord(const TraceFile& file);

}  // namespace kvpool::trace
