#include "common/checksum.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#else
#include <xxhash.h>
#endif

namespace kvpool {

uint64_t Checksum(const void* data, size_t length) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, length);
#else
  return XXH3_64bits(data, length);
#endif
}

struct ChecksumStream::State {
  State() : xxh(XXH3_createState()) {
    if (xxh == nullptr) throw std::bad_alloc();
    XXH3_64bits_reset(xxh);
  }
  ~State() { XXH3_freeState(xxh); }
  XXH3_state_t* xxh;
};

ChecksumStream::ChecksumStream() : state_(std::make_unique<State>()) {}
ChecksumStream::~ChecksumStream() = default;

void ChecksumStream::Update(const void* data, size_t length) {
#if defined(__x86_64__)
  XXH3_64bits_update_dispatch(state_->xxh, data, length);
#else
  XXH3_64bits_update(state_->xxh, data, length);
#endif
}

uint64_t ChecksumStream::Digest() const { return XXH3_64bits_digest(state_->xxh); }

uint64_t CopyWithChecksum(void* dst, const void* src, size_t length) {
  // Small enough to stay in a core's L2 between the copy and the hash.
  constexpr size_t kPiece = 64 << 10;
  if (length <= kPiece) {
    if (length > 0) std::memcpy(dst, src, length);  // an empty value may have no address
    return Checksum(dst, length);
  }
  ChecksumStream stream;
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  for (size_t done = 0; done < length; done += kPiece) {
    const size_t n = std::min(kPiece, length - done);
    std::memcpy(out + done, in + done, n);
    stream.Update(out + done, n);
  }
  return stream.Digest();
}

// One value per task; the caller waits for the tasks helpers claimed, not only for the claims.
class ChecksumJob final : public ParallelJob {
 public:
  ChecksumJob(std::span<const std::span<const std::byte>> values, std::span<uint64_t> out)
      : ParallelJob(values.size()), values_(values), out_(out), left_(values.size()) {}

  void WaitAllDone() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  void RunTask(size_t i) override {
    out_[i] = Checksum(values_[i]);
    std::lock_guard<std::mutex> lock(mu_);
    if (--left_ == 0) done_.notify_all();
  }

  const std::span<const std::span<const std::byte>> values_;
  const std::span<uint64_t> out_;
  std::mutex mu_;
  std::condition_variable done_;
  size_t left_;  // guarded by mu_
};

void ChecksumAll(HelperPool& pool, std::span<const std::span<const std::byte>> values, std::span<uint64_t> out) {
  if (values.size() <= 1) {
    for (size_t i = 0; i < values.size(); ++i) out[i] = Checksum(values[i]);
    return;
  }
  auto job = std::make_shared<ChecksumJob>(values, out);
  pool.Run(job);
  job->WaitAllDone();
}

BackgroundChecksums::BackgroundChecksums(HelperPool& pool, std::span<const std::span<const std::byte>> values,
                                         std::span<uint64_t> out)
    : job_(std::make_shared<ChecksumJob>(values, out)) {
  pool.Post(job_);
}

void BackgroundChecksums::Wait() {
  while (job_->RunOne()) {
  }
  job_->WaitAllDone();
}

}  // namespace kvpool
