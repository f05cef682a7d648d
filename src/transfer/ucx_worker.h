// UcxWorker: one UCX context and worker, driven by a thread of its own. Every UCX call kvpool
// makes runs on that thread (handed over with Post or Call), so the worker runs in UCX's
// single-thread mode and the data path takes no UCX lock.
//
// The thread sleeps on the worker's event fd (UCP_FEATURE_WAKEUP) while nothing is in
// flight, and ticks every millisecond while the owner says work is outstanding, so the owner
// notices abandoned batches promptly (ucx_transport.cc). Only built with -DKVPOOL_UCX=ON.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transfer/transfer_engine.h"  // UcxSettings
#include "transfer/unique_fd.h"

namespace kvpool::transfer {

class UcxWorker {
 public:
  // `name` names the thread ("ucx-client", "ucx-store"). Fails with UNAVAILABLE, saying why,
  // when UCX cannot start with these settings (an unknown transport, no usable device).
  static Result<std::unique_ptr<UcxWorker>> Start(const std::string& name, const UcxSettings& settings);
  // Runs the tasks already posted and the on_stop hook (SetHooks) on the thread, then joins it;
  // tasks posted after that are dropped without running.
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Any thread: runs `task` on the worker thread soon, in posting order.
  void Post(std::function<void()> task);
  // Any thread but the worker's: runs `task` there and waits for it (control path).
  void Call(const std::function<void()>& task);
  // `on_turn` runs on the thread once per loop turn, after progress; `busy` says whether the
  // owner has work in flight (the loop then turns every millisecond instead of sleeping until
  // UCX signals); `on_stop` runs last, before the thread exits. Any may be empty.
  void SetHooks(std::function<void()> on_turn, std::function<bool()> busy, std::function<void()> on_stop);

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // The worker's address, for peers to create endpoints to it.
  const std::vector<uint8_t>& address() const { return address_; }
  // Whether this UCX can move CUDA memory (Debian's libucx is built without it).
  bool cuda_memory() const { return cuda_memory_; }
  // For start-up logs: "UCX 1.13.1 (no CUDA memory)".
  std::string Describe() const;

 private:
  UcxWorker() = default;
  void Run();
  void Wake();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  bool cuda_memory_ = false;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<std::function<void()>> posted_;
  std::function<void()> on_turn_;
  std::function<bool()> busy_;
  std::function<void()> on_stop_;
  std::thread thread_;
};

// "UCX error: <ucs_status_string>" with a context, as UNAVAILABLE (a peer or device problem).
Status UcxStatus(std::string_view context, ucs_status_t status);

}  // namespace kvpool::transfer
