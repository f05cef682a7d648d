// PartCalls: one unary gRPC call to each of several pool parts' masters, all in flight at
// once, so a batch that touches N parts costs one round trip to the slowest, not N.
//
// Every call is started on one completion queue that the calling thread then drains itself:
// no other thread touches a reply, and a one-part pool costs what a synchronous call does.
// Internal to the client library.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
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
  // When the call whose reply this is was sent: leases and timeouts the master grants run from
  // then (a call retried on a new leader is sent again).
  std::chrono::steady_clock::time_point sent;
};

struct PartCallOptions {
  std::chrono::milliseconds timeout{5000};
  bool wait_for_ready = false;  // wait (within timeout) for a master that is not connected yet
};

// Runs calls[i] against stubs[calls[i].part] and returns when every call has its status.
// `prepare(stub, context, call, queue)` returns the method's PrepareAsync reader, e.g.
//   [](auto& stub, auto* ctx, auto& c, auto* cq) { return stub.PrepareAsyncStat(ctx, c.request, cq); }
template <class Call, class Prepare>
void RunPartCalls(const std::vector<std::shared_ptr<proto::Master::Stub>>& stubs, std::vector<Call>& calls,
                  const PartCallOptions& options, Prepare prepare) {
  if (calls.empty()) return;
  const auto deadline = std::chrono::system_clock::now() + options.timeout;  // gRPC takes wall-clock deadlines
  grpc::CompletionQueue queue;
  std::vector<grpc::ClientContext> contexts(calls.size());
  using Reader = decltype(prepare(*stubs[0], &contexts[0], calls[0], &queue));
  std::vector<Reader> readers;
  readers.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    contexts[i].set_deadline(deadline);
    contexts[i].set_wait_for_ready(options.wait_for_ready);
    calls[i].sent = std::chrono::steady_clock::now();
    readers.push_back(prepare(*stubs[calls[i].part], &contexts[i], calls[i], &queue));
    readers.back()->StartCall();
    readers.back()->Finish(&calls[i].reply, &calls[i].status, reinterpret_cast<void*>(i));
  }
  // Every started call completes (at the latest at its deadline), so this ends.
  void* tag = nullptr;
  bool ok = false;
  for (size_t done = 0; done < calls.size() && queue.Next(&tag, &ok); ++done) {
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
}

}  // namespace kvpool::client
