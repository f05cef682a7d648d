// HelperPool: persistent helper threads that split a job of independent tasks with the thread
// that runs it (the transfer engine's large shm copies, the checksums of a batch of values).
// No thread is created per job; a caller whose work is small runs it alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvpool {

// A fixed set of independent tasks that any thread may claim, one at a time.
class ParallelJob {
 public:
  explicit ParallelJob(size_t task_count) : task_count_(task_count) {}
  virtual ~ParallelJob() = default;

  // Claims and runs the next task. Returns false when every task has been claimed.
  bool RunOne() {
    size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= task_count_) return false;
    RunTask(i);
    return true;
  }

 protected:
  virtual void RunTask(size_t i) = 0;

 private:
  const size_t task_count_;
  std::atomic<size_t> next_{0};
};

class HelperPool {
 public:
  explicit HelperPool(int helper_threads);
  ~HelperPool();  // joins helpers; REQUIRES: no Run() in progress
  HelperPool(const HelperPool&) = delete;
  HelperPool& operator=(const HelperPool&) = delete;

  int helper_threads() const { return static_cast<int>(helpers_.size()); }

  // Runs `job`'s tasks on the helpers and on the calling thread. Returns once every task has
  // been claimed; tasks claimed by helpers may still be running.
  void Run(const std::shared_ptr<ParallelJob>& job);
  // Hands `job`'s tasks to the helpers only and returns at once: the caller goes on with other
  // work and claims what is left later (job->RunOne()). With no helpers nothing runs until then.
  void Post(const std::shared_ptr<ParallelJob>& job);

 private:
  void HelperLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<ParallelJob>> jobs_;  // jobs that may still have unclaimed tasks
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace kvpool
