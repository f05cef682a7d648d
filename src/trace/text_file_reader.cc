#include "trace/text_file_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace kvpool::trace {
namespace {

constexpr size_t kReadSize = 1 << 20;

}  // namespace

struct TextFileReader::GzFile {
  gzFile handle = nullptr;
  ~GzFile() {
    if (handle) gzclose(handle);
  }
};

Result<std::unique_ptr<TextFileReader>> TextFileReader::Open(const std::string& path) {
  auto file = std::make_unique<GzFile>();
  errno = 0;
  file->handle = gzopen(path.c_str(), "rb");
  if (!file->handle)
    return NotFound(fmt::format("cannot open '{}': {}", path, errno ? std::strerror(errno) : "out of memory"));
  gzbuffer(file->handle, kReadSize);
  return std::unique_ptr<TextFileReader>(new TextFileReader(path, std::move(file)));
}

TextFileReader::TextFileReader(std::string path, std::unique_ptr<GzFile> file)
    : path_(std::move(path)), file_(std::move(file)) {}

TextFileReader::~TextFileReader() = default;

Result<bool> TextFileReader::Fill() {
  buffer_.erase(0, next_);
  next_ = 0;
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + kReadSize);
  const int n = gzread(file_->handle, buffer_.data() + old_size, kReadSize);
  buffer_.resize(old_size + static_cast<size_t>(std::max(n, 0)));
  // Bytes read before damage are returned first; the damage shows on the next call. A gzip
  // stream cut short reads as the end of the file with Z_BUF_ERROR set.
  if (n > 0) return true;
  int code = Z_OK;
  std::string_view message = gzerror(file_->handle, &code);
  if (n == 0 && (code == Z_OK || code == Z_STREAM_END)) return false;
  if (code == Z_ERRNO) message = std::strerror(errno);
  if (message.starts_with(path_ + ": ")) message.remove_prefix(path_.size() + 2);  // zlib names the file too
  return Unavailable(fmt::format("{}: read failed: {}{}", path_, message,
                                 code == Z_BUF_ERROR ? " (the gzip stream is truncated)" : ""));
}

Result<bool> TextFileReader::NextLine(std::string* line) {
  size_t searched = next_;
  while (true) {
    if (const void* nl = std::memchr(buffer_.data() + searched, '\n', buffer_.size() - searched)) {
      const size_t end = static_cast<const char*>(nl) - buffer_.data();
      line->assign(buffer_, next_, end - next_);
      next_ = end + 1;
      return true;
    }
    searched = buffer_.size() - next_;  // offsets shift to 0 when Fill drops what was returned
    Result<bool> more = Fill();
    if (!more.ok()) return more.status();
    if (!*more) {
      if (next_ == buffer_.size()) return false;
      line->assign(buffer_, next_, std::string::npos);
      next_ = buffer_.size();
      return true;
    }
  }
}

Result<std::string> TextFileReader::ReadAll() {
  while (true) {
    Result<bool> more = Fill();
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  buffer_.erase(0, next_);
  next_ = 0;
  std::string all = std::move(buffer_);  // handed over, not copied: it may be a whole document
  buffer_.clear();
  return all;
}

}  // namespace kvpool::trace
