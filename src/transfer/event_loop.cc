#include "transfer/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace kvpool::transfer {

EventLoop::EventLoop(std::string name, std::chrono::milliseconds tick, std::function<void()> on_tick)
    : name_(std::move(name)),
      tick_(tick),
      on_tick_(std::move(on_tick)),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!epoll_fd_.valid() || !wake_fd_.valid()) {
    spdlog::critical("{}: cannot create epoll/eventfd: {}", name_, std::strerror(errno));
    std::abort();
  }
  // spdlog builds its registry on first use; do it before our thread exists so that
  // initialization happens-before any logging from the loop (tsan cannot see into libspdlog).
  spdlog::default_logger_raw();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wake fd
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  thread_ = std::thread([this] { Run(); });
}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Stop() {
  if (!stopping_.exchange(true)) Wake();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(posted_mu_);
  posted_.clear();
}

void EventLoop::Add(int fd, uint32_t events, Handler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    spdlog::error("{}: epoll add fd {}: {}", name_, fd, std::strerror(errno));
  }
}

void EventLoop::Modify(int fd, uint32_t events, Handler* handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Remove(int fd) { ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  Wake();
}

void EventLoop::Wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

void EventLoop::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  std::vector<std::function<void()>> work;
  auto next_tick = std::chrono::steady_clock::now() + tick_;
  while (!stopping_.load(std::memory_order_acquire)) {
    int n = ::epoll_wait(epoll_fd_.get(), events, kMaxEvents, static_cast<int>(tick_.count()));
    if (n < 0 && errno != EINTR) {
      spdlog::error("{}: epoll_wait: {}", name_, std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        uint64_t count;
        ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof(count));
        (void)ignored;
        continue;
      }
      static_cast<Handler*>(events[i].data.ptr)->OnEvents(events[i].events);
    }
    {
      std::lock_guard<std::mutex> lock(posted_mu_);
      work.swap(posted_);
    }
    for (auto& fn : work) {
      if (stopping_.load(std::memory_order_acquire)) break;
      fn();
    }
    work.clear();
    auto now = std::chrono::steady_clock::now();
    if (now >= next_tick) {
      next_tick = now + tick_;
      if (on_tick_) on_tick_();
    }
  }
}

}  // namespace kvpool::transfer
