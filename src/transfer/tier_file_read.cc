#include "transfer/tier_file_read.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "transfer/socket_util.h"

namespace kvpool::transfer {
namespace {

constexpr uint64_t kBlock = 4096;             // O_DIRECT's alignment on the filesystems we meet
constexpr uint64_t kPieceBytes = 1 << 20;     // each pread: large enough to keep a disk busy

struct FreeAligned {
  void operator()(char* p) const { std::free(p); }
};

char* PieceBuffer() {
  thread_local std::unique_ptr<char, FreeAligned> buffer(static_cast<char*>(std::aligned_alloc(kBlock, kPieceBytes)));
  return buffer.get();
}

}  // namespace

Status ReadTierFile(int fd, uint64_t offset, char* out, uint64_t length, ChecksumStream* hash, AccessGate* gate) {
  char* piece = PieceBuffer();
  if (piece == nullptr) return Internal("no memory for a tier read buffer");
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = offset + done;
    const uint64_t start = at & ~(kBlock - 1);
    const uint64_t skip = at - start;
    const uint64_t want = std::min(kPieceBytes, (skip + (length - done) + kBlock - 1) & ~(kBlock - 1));
    const ssize_t n = ::pread(fd, piece, want, static_cast<off_t>(start));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(StatusCode::kInternal, fmt::format("read of the SSD tier file at {}", start), errno);
    }
    if (static_cast<uint64_t>(n) <= skip) {
      return InvalidArgument(fmt::format("[{}, +{}) runs past the end of the SSD tier file", offset, length));
    }
    const uint64_t take = std::min<uint64_t>(static_cast<uint64_t>(n) - skip, length - done);
    if (gate != nullptr && !gate->Enter()) return Timeout("the read was abandoned before it ended");
    std::memcpy(out + done, piece + skip, take);
    if (hash != nullptr) hash->Update(out + done, take);
    if (gate != nullptr) gate->Exit();
    done += take;
  }
  return Status::Ok();
}

}  // namespace kvpool::transfer
