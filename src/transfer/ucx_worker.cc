#include "transfer/ucx_worker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <condition_variable>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvpool::transfer {

Status UcxStatus(std::string_view context, ucs_status_t status) {
  return Unavailable(fmt::format("{}: UCX says {}", context, ucs_status_string(status)));
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::Start(const std::string& name, const UcxSettings& settings) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcxStatus("reading UCX's configuration", s);
  for (const auto& [key, value] : {std::pair{"TLS", settings.transports}, std::pair{"NET_DEVICES", settings.devices}}) {
    if (value.empty()) continue;
    s = ucp_config_modify(config, key, value.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(fmt::format("UCX_{}={}", key, value), s);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.name = name.c_str();
  s = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (s != UCS_OK) {
    return UcxStatus(fmt::format("starting UCX (UCX_TLS={}, UCX_NET_DEVICES={})",
                                 settings.transports.empty() ? "default" : settings.transports,
                                 settings.devices.empty() ? "default" : settings.devices),
                     s);
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(w->context_, &attr) == UCS_OK) {
    w->cuda_memory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only our thread calls it
  s = ucp_worker_create(w->context_, &worker_params, &w->worker_);
  if (s != UCS_OK) return UcxStatus("creating a UCX worker", s);
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  s = ucp_worker_get_address(w->worker_, &address, &address_length);
  if (s != UCS_OK) return UcxStatus("reading the UCX worker's address", s);
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  w->address_.assign(bytes, bytes + address_length);
  ucp_worker_release_address(w->worker_, address);

  int event_fd = -1;
  s = ucp_worker_get_efd(w->worker_, &event_fd);
  if (s != UCS_OK) return UcxStatus("reading the UCX worker's event fd", s);
  w->epoll_fd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  w->wake_fd_.Reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!w->epoll_fd_.valid() || !w->wake_fd_.valid()) {
    return Status(StatusCode::kInternal, fmt::format("epoll/eventfd: {}", std::strerror(errno)));
  }
  for (int fd : {event_fd, w->wake_fd_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(w->epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status(StatusCode::kInternal, fmt::format("epoll_ctl: {}", std::strerror(errno)));
    }
  }
  w->thread_ = std::thread([raw = w.get()] { raw->Run(); });
  return w;
}

std::string UcxWorker::Describe() const {
  return fmt::format("UCX {} ({}CUDA memory)", ucp_get_version_string(), cuda_memory_ ? "" : "no ");
}

UcxWorker::~UcxWorker() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    Wake();
    thread_.join();
  }
  // Tasks posted after the thread's last turn are dropped here, not run; dropping one may
  // post another (a channel's last reference), hence the loop.
  for (;;) {
    std::vector<std::function<void()>> late;
    {
      std::lock_guard<std::mutex> lock(mu_);
      late.swap(posted_);
    }
    if (late.empty()) break;
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxWorker::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(task));
  }
  Wake();
}

void UcxWorker::Call(const std::function<void()>& task) {
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  Post([&] {
    task();
    std::lock_guard<std::mutex> lock(done_mu);
    done = true;
    done_cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return done; });
}

void UcxWorker::SetHooks(std::function<void()> on_turn, std::function<bool()> busy, std::function<void()> on_stop) {
  Call([&] {
    on_turn_ = std::move(on_turn);
    busy_ = std::move(busy);
    on_stop_ = std::move(on_stop);
  });
}

void UcxWorker::Wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

void UcxWorker::Run() {
  std::vector<std::function<void()>> tasks;
  while (!stopping_.load(std::memory_order_acquire)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks.swap(posted_);
    }
    for (auto& task : tasks) task();
    tasks.clear();
    while (ucp_worker_progress(worker_) != 0) {
    }
    if (on_turn_) on_turn_();
    const bool busy = busy_ && busy_();
    // Arm, then sleep until UCX or a Post signals; BUSY means events are pending already.
    const ucs_status_t armed = ucp_worker_arm(worker_);
    if (armed == UCS_ERR_BUSY) continue;
    if (armed != UCS_OK) spdlog::warn("ucx: arming the worker failed: {}", ucs_status_string(armed));
    epoll_event events[2];
    const int n = ::epoll_wait(epoll_fd_.get(), events, 2, busy || armed != UCS_OK ? 1 : -1);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_.get()) {
        uint64_t count;
        ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof(count));
        (void)ignored;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(posted_);
  }
  for (auto& task : tasks) task();  // a Call() waiting on its task must not hang
  if (on_stop_) on_stop_();
}

}  // namespace kvpool::transfer
