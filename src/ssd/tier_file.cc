#include "ssd/tier_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvpool::ssd {
namespace {

constexpr uint64_t kPage = 4096;
// io_uring takes a 32-bit length; longer requests go in pieces of this much.
constexpr uint64_t kMaxPieceBytes = uint64_t{1} << 30;
// The user data of an entry that stands for no request (a refused one, turned into a no-op).
constexpr uint64_t kNoRequest = ~uint64_t{0};

std::string Errno(int e) { return std::strerror(e); }

// The O_DIRECT alignment the filesystem asks for (STATX_DIOALIGN, Linux 6.1+), never below a
// page, so a 4 KiB-sector device is always served.
uint64_t DirectAlignment(int fd) {
  uint64_t align = kPage;
#ifdef STATX_DIOALIGN
  struct statx st {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &st) == 0 && (st.stx_mask & STATX_DIOALIGN)) {
    align = std::max<uint64_t>({align, st.stx_dio_mem_align, st.stx_dio_offset_align});
  }
#endif
  return align;
}

}  // namespace

Result<std::unique_ptr<TierFile>> TierFile::Open(const std::string& path, uint64_t size, TierFileOptions options) {
  if (size == 0 || size % kPage != 0) {
    return InvalidArgument(fmt::format("SSD tier size {} is not a positive multiple of 4 KiB", size));
  }
  if (options.queue_depth == 0 || options.queue_depth > 4096) {
    return InvalidArgument(fmt::format("SSD tier queue depth {} is outside 1..4096", options.queue_depth));
  }
  bool direct = options.direct;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
  if (fd < 0 && direct && errno == EINVAL) {
    spdlog::warn("SSD tier {}: the filesystem refuses O_DIRECT; using the page cache (slower, and it takes memory)",
                 path);
    direct = false;
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }
  if (fd < 0) return Unavailable(fmt::format("SSD tier {}: cannot open: {}", path, Errno(errno)));
  // Reserve every byte now: a full disk is an error here, not a failed write later. Bytes
  // already in the file (a restart on it) are kept.
  if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(size)); e != 0) {
    close(fd);
    if (e == ENOSPC) {
      return NoSpace(fmt::format("SSD tier {}: the filesystem has no room for {} bytes", path, size));
    }
    return Unavailable(fmt::format("SSD tier {}: cannot allocate {} bytes: {}", path, size, Errno(e)));
  }
  auto ring = std::make_unique<io_uring>();
  if (const int e = io_uring_queue_init(options.queue_depth, ring.get(), 0); e < 0) {
    close(fd);
    return Unavailable(fmt::format("SSD tier {}: io_uring set-up failed: {} (is /proc/sys/kernel/io_uring_disabled set?)",
                                   path, Errno(-e)));
  }
  std::unique_ptr<TierFile> file(
      new TierFile(path, fd, size, direct, direct ? DirectAlignment(fd) : 1, options.queue_depth));
  file->ring_ = std::move(ring);
  return file;
}

TierFile::TierFile(std::string path, int fd, uint64_t size, bool direct, uint64_t alignment, unsigned depth)
    : path_(std::move(path)), fd_(fd), size_(size), direct_(direct), alignment_(alignment), depth_(depth) {}

TierFile::~TierFile() {
  if (ring_) io_uring_queue_exit(ring_.get());
  close(fd_);
}

Status TierFile::Check(const FileIo& io) const {
  const uint64_t length = io.data.size();
  if (io.offset > size_ || length > size_ - io.offset) {
    return InvalidArgument(fmt::format("SSD tier {}: bytes [{}, +{}) lie outside the file of {} bytes", path_,
                                       io.offset, length, size_));
  }
  const auto address = reinterpret_cast<uintptr_t>(io.data.data());
  if (direct_ && (io.offset % alignment_ || length % alignment_ || address % alignment_)) {
    return InvalidArgument(fmt::format("SSD tier {}: O_DIRECT needs offset, length and buffer aligned to {} bytes "
                                       "(offset {}, length {}, buffer {:#x})",
                                       path_, alignment_, io.offset, length, address));
  }
  return Status::Ok();
}

std::vector<Status> TierFile::Run(std::span<const FileIo> requests) {
  std::vector<Status> result(requests.size());
  size_t next = 0;
  Stream([&]() -> std::optional<TaggedIo> {
    if (next == requests.size()) return std::nullopt;
    return TaggedIo{requests[next], next++};
  }, [&](uint64_t tag, Status status) { result[tag] = std::move(status); });
  return result;
}

void TierFile::Stream(const std::function<std::optional<TaggedIo>()>& next,
                      const std::function<void(uint64_t, Status)>& done) {
  struct Entry {  // a request taken from `next` and not yet done
    FileIo io;
    uint64_t tag = 0;
    uint64_t moved = 0;  // bytes transferred so far
  };
  std::vector<Entry> entries(depth_);
  std::vector<unsigned> free_entries;
  for (unsigned e = depth_; e-- > 0;) free_entries.push_back(e);
  std::deque<unsigned> again;  // entries with bytes left after a short transfer, not queued
  auto finish = [&](unsigned e, Status status) {
    done(entries[e].tag, std::move(status));
    free_entries.push_back(e);
  };
  std::lock_guard<std::mutex> lock(mu_);
  io_uring* ring = ring_.get();
  std::deque<std::pair<io_uring_sqe*, unsigned>> queued;  // prepared, not yet taken by the kernel
  unsigned in_flight = 0;                                 // taken, completion not yet seen
  bool drained = false;                                   // `next` has no more
  int refusals = 0;
  while (!drained || !again.empty() || !queued.empty() || in_flight > 0) {
    // Keep the ring full: requests continued after a short transfer first, then new ones.
    while (in_flight + queued.size() < depth_) {
      unsigned e;
      if (!again.empty()) {
        e = again.front();
        again.pop_front();
      } else if (!drained && !free_entries.empty()) {
        std::optional<TaggedIo> r = next();
        if (!r) {
          drained = true;
          break;
        }
        if (Status check = Check(r->io); !check.ok() || r->io.data.empty()) {
          done(r->tag, std::move(check));
          continue;
        }
        e = free_entries.back();
        free_entries.pop_back();
        entries[e] = {r->io, r->tag, 0};
      } else {
        break;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) {
        again.push_front(e);
        break;
      }
      const FileIo& io = entries[e].io;
      std::byte* at = io.data.data() + entries[e].moved;
      const auto length = static_cast<unsigned>(std::min(io.data.size() - entries[e].moved, kMaxPieceBytes));
      if (io.kind == FileIo::kRead) {
        io_uring_prep_read(sqe, fd_, at, length, io.offset + entries[e].moved);
      } else {
        io_uring_prep_write(sqe, fd_, at, length, io.offset + entries[e].moved);
      }
      io_uring_sqe_set_data64(sqe, e);
      queued.emplace_back(sqe, e);
    }
    if (!queued.empty() || stale_entries_ > 0) {
      const int n = io_uring_submit(ring);
      if (n >= 0) {
        // The kernel takes entries in ring order: no-ops left by an earlier call first.
        const unsigned stale = std::min<unsigned>(stale_entries_, n);
        stale_entries_ -= stale;
        queued.erase(queued.begin(), queued.begin() + std::min<size_t>(queued.size(), n - stale));
        in_flight += n;
        refusals = 0;
      } else if (n != -EINTR && ((n != -EAGAIN && n != -EBUSY) || (in_flight == 0 && ++refusals > 100))) {
        // Nothing more can be submitted: the queued requests fail, and their entries become
        // no-ops, so no later submit runs them on buffers their callers have taken back.
        for (auto& [sqe, e] : queued) {
          io_uring_prep_nop(sqe);
          io_uring_sqe_set_data64(sqe, kNoRequest);
          finish(e, Unavailable(fmt::format("SSD tier {}: io_uring refused the request: {}", path_, Errno(-n))));
        }
        stale_entries_ += queued.size();
        queued.clear();
      }
    }
    if (in_flight == 0) continue;
    io_uring_cqe* cqe = nullptr;
    if (const int err = io_uring_wait_cqe(ring, &cqe); err < 0) {
      if (err == -EINTR || err == -EAGAIN) continue;
      // The kernel may still write into the callers' buffers: returning would hand them back.
      spdlog::critical("SSD tier {}: waiting for io_uring failed with requests in flight: {}", path_, Errno(-err));
      std::abort();
    }
    const uint64_t e = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    --in_flight;
    if (e == kNoRequest) continue;
    Entry& entry = entries[e];
    const char* what = entry.io.kind == FileIo::kRead ? "read" : "write";
    if (res < 0) {
      finish(e, Unavailable(fmt::format("SSD tier {}: {} of [{}, +{}) failed: {}", path_, what, entry.io.offset,
                                        entry.io.data.size(), Errno(-res))));
    } else if (res == 0) {
      finish(e, Unavailable(fmt::format("SSD tier {}: {} of [{}, +{}) stopped after {} bytes", path_, what,
                                        entry.io.offset, entry.io.data.size(), entry.moved)));
    } else if ((entry.moved += static_cast<uint64_t>(res)) < entry.io.data.size()) {
      again.push_back(e);  // a short transfer: the rest goes again
    } else {
      finish(e, Status::Ok());
    }
  }
}

}  // namespace kvpool::ssd
