// TextFileReader: reads a text file that may be gzip-compressed, by line or whole.
//
// Plain and gzip files read the same way (zlib reads a file without a gzip header as it is),
// so every trace layout has a compressed variant for free. Reading streams: a line at a time
// costs one buffer and the line, whatever the file's size.
//
// A gzip file that ends early or fails its checksum is an error naming the file and what zlib
// found, never a silently shorter file. Not thread-safe; one reader per file.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace kvpool::trace {

class TextFileReader {
 public:
  // NOT_FOUND when the file cannot be opened.
  static Result<std::unique_ptr<TextFileReader>> Open(const std::string& path);
  ~TextFileReader();
  TextFileReader(const TextFileReader&) = delete;
  TextFileReader& operator=(const TextFileReader&) = delete;

  // The next line, without its '\n'; false at the end of the file. The last line need not
  // end in '\n'. UNAVAILABLE when the file cannot be read or decompressed further.
  Result<bool> NextLine(std::string* line);

  // Everything not read yet.
  Result<std::string> ReadAll();

  const std::string& path() const { return path_; }

 private:
  struct GzFile;
  TextFileReader(std::string path, std::unique_ptr<GzFile> file);
  // Refills buffer_ from the file; false at the end of the file.
  Result<bool> Fill();

  std::string path_;
  std::unique_ptr<GzFile> file_;
  std::string buffer_;  // decompressed bytes not returned yet start at buffer_[next_]
  size_t next_ = 0;
};

}  // namespace kvpool::trace
