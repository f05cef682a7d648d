#include "common/helper_pool.h"

#include <algorithm>

namespace kvpool {

HelperPool::HelperPool(int helper_threads) {
  for (int i = 0; i < helper_threads; ++i) helpers_.emplace_back([this] { HelperLoop(); });
}

HelperPool::~HelperPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

void HelperPool::Run(const std::shared_ptr<ParallelJob>& job) {
  if (!helpers_.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
  }
  while (job->RunOne()) {
  }
  if (!helpers_.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
  }
}

void HelperPool::Post(const std::shared_ptr<ParallelJob>& job) {
  if (helpers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  cv_.notify_all();
}

void HelperPool::HelperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::shared_ptr<ParallelJob> job = jobs_.front();
    lock.unlock();
    bool ran = job->RunOne();
    lock.lock();
    if (!ran && !jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
  }
}

}  // namespace kvpool
