// PartCalls: one unary gRPC call to each of several pool parts' masters, all in flight at
// once, so a batch that touches N parts costs one round trip to the slowest, not N.
//
// The first call runs synchronously on the calling thread (a one-part pool pays no thread
// hop); the others go through gRPC's callback API. Internal to the client library.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "proto/master.grpc.pb.h"

namespace kvpool::client {

template <class Request, class Reply>
struct PartCall {
  uint32_t part = 0;
  std::vector<size_t> keys;  // positions, in the caller's batch, of the keys this call carries
  Request request;
  Reply reply;
  grpc::Status status;
};

struct PartCallOptions {
  std::chrono::milliseconds timeout{5000};
  bool wait_for_ready = false;  // wait (within timeout) for a master that is not connected yet
};

// Runs calls[i] against stubs[calls[i].part]. `sync(stub, context, call)` returns the call's
// grpc::Status; `start(stub, context, call, done)` starts it and has gRPC run done(status).
// Returns when every call has its status.
template <class Call, class Sync, class Start>
void RunPartCalls(const std::vector<std::unique_ptr<proto::Master::Stub>>& stubs, std::vector<Call>& calls,
                  const PartCallOptions& options, Sync sync, Start start) {
  if (calls.empty()) return;
  const auto deadline = std::chrono::system_clock::now() + options.timeout;  // gRPC takes wall-clock deadlines
  std::vector<grpc::ClientContext> contexts(calls.size());
  for (auto& context : contexts) {
    context.set_deadline(deadline);
    context.set_wait_for_ready(options.wait_for_ready);
  }
  // Notified under the lock: once the waiter sees 0, no callback touches these again.
  std::mutex mu;
  std::condition_variable cv;
  size_t outstanding = calls.size() - 1;
  for (size_t i = 1; i < calls.size(); ++i) {
    start(*stubs[calls[i].part], &contexts[i], calls[i], [&, &call = calls[i]](grpc::Status s) {
      std::lock_guard lock(mu);
      call.status = std::move(s);
      if (--outstanding == 0) cv.notify_one();
    });
  }
  calls[0].status = sync(*stubs[calls[0].part], &contexts[0], calls[0]);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return outstanding == 0; });
}

}  // namespace kvpool::client
