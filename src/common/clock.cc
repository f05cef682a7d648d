#include "common/clock.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace kvpool {
namespace {

// The default timer: a thread that waits `period` (or a RunSoon), runs the task, and again.
class ThreadTimer final : public Timer {
 public:
  ThreadTimer(std::chrono::nanoseconds period, std::function<void()> task)
      : period_(period), task_(std::move(task)), thread_([this] { Loop(); }) {}
  ~ThreadTimer() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void RunSoon() override {
    {
      std::lock_guard lock(mu_);
      soon_ = true;
    }
    wake_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      wake_.wait_for(lock, period_, [this] { return stopping_ || soon_; });
      if (stopping_) return;
      soon_ = false;
      lock.unlock();
      task_();
      lock.lock();
    }
  }

  const std::chrono::nanoseconds period_;
  const std::function<void()> task_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  bool soon_ = false;      // guarded by mu_
  std::thread thread_;     // last: starts once the rest is built
};

}  // namespace

std::unique_ptr<Timer> Clock::Every(std::chrono::nanoseconds period, std::function<void()> task) {
  return std::make_unique<ThreadTimer>(period, std::move(task));
}

}  // namespace kvpool
