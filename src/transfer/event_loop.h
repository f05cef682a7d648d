// EventLoop: one io thread running epoll (level-triggered) over non-blocking sockets.
// Everything registered on a loop is touched only by its thread; other threads hand work
// over with Post(). A periodic tick lets owners expire connects and stalled connections.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transfer/unique_fd.h"

namespace kvpool::transfer {

class EventLoop {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // Called on the loop thread with the epoll event bits for the handler's fd.
    virtual void OnEvents(uint32_t events) = 0;
  };

  // Starts the thread. `on_tick` (may be empty) runs on the loop thread about every `tick`.
  EventLoop(std::string name, std::chrono::milliseconds tick, std::function<void()> on_tick);
  // Stops and joins. Posted functions that have not run are dropped without running.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Loop thread only. REQUIRES: `handler` outlives its registration.
  void Add(int fd, uint32_t events, Handler* handler);
  void Modify(int fd, uint32_t events, Handler* handler);
  void Remove(int fd);

  // Any thread: runs `fn` on the loop thread soon, in posting order.
  void Post(std::function<void()> fn);
  // Any thread: asks the thread to exit and joins it. Idempotent.
  // REQUIRES: not called from the loop thread.
  void Stop();

  bool InLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();
  void Wake();

  std::string name_;
  std::chrono::milliseconds tick_;
  std::function<void()> on_tick_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;  // eventfd
  std::atomic<bool> stopping_{false};
  std::mutex posted_mu_;
  std::vector<std::function<void()>> posted_;
  std::thread thread_;
};

}  // namespace kvpool::transfer
