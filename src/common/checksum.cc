#include "common/checksum.h"

#include <condition_variable>
#include <memory>
#include <mutex>

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
