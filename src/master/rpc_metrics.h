// RpcMetrics: per-method call counts, error counts and latency histograms for the master's
// gRPC service. Lock-free (relaxed atomics): recording sits on every call's path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/histogram.h"

namespace kvpool::master {

enum class RpcMethod : int {
  kMountSegment,
  kUnmountSegment,
  kHeartbeat,
  kBatchPutStart,
  kBatchPutEnd,
  kBatchPutRevoke,
  kBatchGetReplicas,
  kBatchExists,
  kBatchRemove,
  kBatchRetain,
  kStat,
  kDescribe,
  kCount,  // not a method
};

std::string_view RpcMethodName(RpcMethod method);

class RpcMetrics {
 public:
  // Upper bounds of the latency buckets, in seconds (Prometheus `le` labels); a last,
  // implicit bucket is +Inf.
  static constexpr std::array<double, 14> kBucketSeconds = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
      0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1.0};

  // `keys` is the batch size (items in the request), so keys/s can be derived.
  void Record(RpcMethod method, int64_t latency_ns, uint64_t keys);

  // Appends the Prometheus text exposition of every series.
  void AppendPrometheus(std::string* out) const;

 private:
  struct PerMethod {
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> keys{0};
    Histogram latency{kBucketSeconds};
  };
  std::array<PerMethod, static_cast<size_t>(RpcMethod::kCount)> methods_;
};

}  // namespace kvpool::master
