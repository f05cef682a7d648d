// TierFile: the file an SSD tier keeps its objects in, read and written with io_uring in
// large requests, several in flight (Linux's asynchronous I/O interface, through liburing).
//
//   auto file = TierFile::Open("/nvme/kvpool.tier", 64_GiB, {});
//   std::vector<Status> done = (*file)->Run({{FileIo::kWrite, offset, bytes}, ...});
//
// The file is opened with O_DIRECT, so the tier's bytes bypass the page cache (they would
// otherwise compete with the DRAM pool for memory) and every request must be aligned:
// offset, length and buffer address multiples of alignment() (4 KiB unless the filesystem
// reports another). A filesystem that refuses O_DIRECT (tmpfs) gets a buffered file and a
// warning; alignment() is then 1. The whole size is allocated up front (fallocate), so a
// disk too small for it is an error at Open, never a write that fails later for want of
// space.
//
// Run and Stream are safe to call from several threads (they take turns on the one ring); a
// request's error never touches another's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

struct io_uring;

namespace kvpool::ssd {

struct FileIo {
  enum Kind { kRead, kWrite };
  Kind kind = kRead;
  uint64_t offset = 0;
  std::span<std::byte> data;  // read into it, or write from it (never written then)
};

// A request with the caller's tag, for Stream.
struct TaggedIo {
  FileIo io;
  uint64_t tag = 0;
};

struct TierFileOptions {
  unsigned queue_depth = 8;  // requests in flight at once
  bool direct = true;        // O_DIRECT where the filesystem allows it
};

class TierFile {
 public:
  // Opens the file at `path`, creating it when missing, and allocates `size` bytes (a
  // multiple of 4 KiB) on its filesystem. INVALID_ARGUMENT for a bad size or depth,
  // NO_SPACE when the filesystem cannot hold it, UNAVAILABLE for other open errors (the
  // message names the path and the reason).
  static Result<std::unique_ptr<TierFile>> Open(const std::string& path, uint64_t size, TierFileOptions options);
  ~TierFile();
  TierFile(const TierFile&) = delete;
  TierFile& operator=(const TierFile&) = delete;

  // Runs every request, at most queue_depth at once, and returns one Status per request:
  // INVALID_ARGUMENT (not submitted) when it lies outside the file or is misaligned for
  // O_DIRECT; the I/O error (UNAVAILABLE, naming errno) when the kernel failed it. A short
  // transfer is continued until the whole request is done.
  std::vector<Status> Run(std::span<const FileIo> requests);
  // The same for requests made while others run: next() is asked for another whenever the
  // ring has room (std::nullopt: no more), so the queue stays full while the caller prepares
  // the next one; done(tag, status) is called once per request as it completes, in any order,
  // on this thread, before next() is asked again. A caller can so reuse a request's buffer
  // from its done() on.
  void Stream(const std::function<std::optional<TaggedIo>()>& next, const std::function<void(uint64_t, Status)>& done);

  uint64_t size() const { return size_; }
  bool direct() const { return direct_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  // The open file (O_DIRECT when direct()), for readers that read it themselves: a same-host
  // client or the store's tcp server (transfer/tier_file_read.h). Valid while this lives.
  int fd() const { return fd_; }

 private:
  TierFile(std::string path, int fd, uint64_t size, bool direct, uint64_t alignment, unsigned depth);
  Status Check(const FileIo& io) const;

  const std::string path_;
  const int fd_;
  const uint64_t size_;
  const bool direct_;
  const uint64_t alignment_;
  const unsigned depth_;
  std::mutex mu_;  // one Run on the ring at a time
  std::unique_ptr<io_uring> ring_;
  unsigned stale_entries_ = 0;  // no-ops an earlier Run left in the submission queue
};

}  // namespace kvpool::ssd
