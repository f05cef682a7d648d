#include "trace/trace_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "trace/text_file_reader.h"

namespace kvpool::trace {
namespace {

namespace fs = std::filesystem;

bool IsBlank(std::string_view text) { return text.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::string_view WithoutGz(std::string_view name) {
  return name.ends_with(".gz") ? name.substr(0, name.size() - 3) : name;
}

bool IsTraceFileName(std::string_view name) {
  const std::string_view base = WithoutGz(name);
  return base.ends_with(".json") || base.ends_with(".jsonl");
}

}  // namespace

Status ForEachRecord(const TraceFile& file, const RecordVisitor& visit) {
  Result<std::unique_ptr<TextFileReader>> opened = TextFileReader::Open(file.path);
  if (!opened.ok()) return opened.status();
  TextFileReader* reader = opened->get();
  if (file.layout == RecordLayout::kJsonDocument) {
    Result<std::string> text = reader->ReadAll();
    if (!text.ok()) return text.status();
    if (IsBlank(*text)) return Status::Ok();
    return visit(*text, file.path);
  }
  return ForEachLineRecord([reader](std::string* line) { return reader->NextLine(line); }, file.path, visit);
}

Status ForEachLineRecord(const NextLine& next_line, std::string_view source, const RecordVisitor& visit) {
  std::string line;
  for (int64_t line_number = 1;; ++line_number) {
    Result<bool> more = next_line(&line);
    if (!more.ok()) {
      return Unavailable(fmt::format("{}; the records after line {} are lost", more.status().message(),
                                     line_number - 1));
    }
    if (!*more) return Status::Ok();
    if (IsBlank(line)) continue;
    if (Status s = visit(line, fmt::format("{}:{}", source, line_number)); !s.ok()) return s;
  }
}

NextLine LinesOf(std::istream& in, std::string_view source) {
  return [&in, source = std::string(source)](std::string* line) -> Result<bool> {
    if (std::getline(in, *line)) return true;
    if (in.bad()) return Unavailable(fmt::format("{}: read failed: {}", source, std::strerror(errno)));
    return false;
  };
}

RecordLayout LayoutOfFileName(std::string_view name) {
  return WithoutGz(name).ends_with(".json") ? RecordLayout::kJsonDocument : RecordLayout::kJsonLines;
}

Result<std::vector<TraceFile>> ListTraceFiles(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status))
    return NotFound(fmt::format("cannot open '{}': {}", path, error ? error.message() : "no such file or directory"));
  if (!fs::is_directory(status)) return std::vector<TraceFile>{{path, LayoutOfFileName(path)}};

  std::vector<TraceFile> files;
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code not_a_file;  // a dangling link is not a trace file, not a listing error
    if (it->is_regular_file(not_a_file) && IsTraceFileName(name))
      files.push_back({it->path().string(), LayoutOfFileName(name)});
  }
  if (error) return Unavailable(fmt::format("cannot list folder '{}': {}", path, error.message()));
  if (files.empty())
    return InvalidArgument(
        fmt::format("folder '{}' holds no trace files (*.json, *.jsonl, *.json.gz, *.jsonl.gz)", path));
  std::sort(files.begin(), files.end(), [](const TraceFile& a, const TraceFile& b) { return a.path < b.path; });
  return files;
}

Result<FirstTraceRecord> FirstRecord(const TraceFile& file) {
  std::optional<FirstTraceRecord> first;
  Status s = ForEachRecord(file, [&](std::string_view text, const std::string& where) {
    first.emplace(FirstTraceRecord{std::string(text), where});
    return NotReady("first record found");  // ends the walk
  });
  if (first) return std::move(*first);
  if (!s.ok()) return s;
  return InvalidArgument(fmt::format("{}: no records", file.path));
}

}  // namespace kvpool::trace
