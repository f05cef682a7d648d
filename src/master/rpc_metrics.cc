#include "master/rpc_metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/prometheus_text.h"

namespace kvpool::master {

std::string_view RpcMethodName(RpcMethod method) {
  switch (method) {
    case RpcMethod::kMountSegment: return "MountSegment";
    case RpcMethod::kUnmountSegment: return "UnmountSegment";
    case RpcMethod::kHeartbeat: return "Heartbeat";
    case RpcMethod::kBatchPutStart: return "BatchPutStart";
    case RpcMethod::kBatchPutEnd: return "BatchPutEnd";
    case RpcMethod::kBatchPutRevoke: return "BatchPutRevoke";
    case RpcMethod::kBatchGetReplicas: return "BatchGetReplicas";
    case RpcMethod::kBatchExists: return "BatchExists";
    case RpcMethod::kBatchRemove: return "BatchRemove";
    case RpcMethod::kBatchRetain: return "BatchRetain";
    case RpcMethod::kStat: return "Stat";
    case RpcMethod::kDescribe: return "Describe";
    case RpcMethod::kCount: break;
  }
  return "Unknown";
}

void RpcMetrics::Record(RpcMethod method, int64_t latency_ns, uint64_t keys) {
  PerMethod& m = methods_[static_cast<size_t>(method)];
  m.calls.fetch_add(1, std::memory_order_relaxed);
  m.keys.fetch_add(keys, std::memory_order_relaxed);
  m.latency.ObserveNs(static_cast<uint64_t>(std::max<int64_t>(0, latency_ns)));
}

void RpcMetrics::AppendPrometheus(std::string* out) const {
  auto append = [out](std::string_view text) { out->append(text); };
  AppendHeader(out, "kvpool_master_rpc_total", "counter", "RPCs served, by method.");
  for (size_t i = 0; i < methods_.size(); ++i) {
    append(fmt::format("kvpool_master_rpc_total{{method=\"{}\"}} {}\n",
                       RpcMethodName(static_cast<RpcMethod>(i)),
                       methods_[i].calls.load(std::memory_order_relaxed)));
  }
  AppendHeader(out, "kvpool_master_rpc_keys_total", "counter", "Keys (batch items) carried by RPCs, by method.");
  for (size_t i = 0; i < methods_.size(); ++i) {
    append(fmt::format("kvpool_master_rpc_keys_total{{method=\"{}\"}} {}\n",
                       RpcMethodName(static_cast<RpcMethod>(i)),
                       methods_[i].keys.load(std::memory_order_relaxed)));
  }
  AppendHeader(out, "kvpool_master_rpc_latency_seconds", "histogram", "Time the master spent serving an RPC.");
  for (size_t i = 0; i < methods_.size(); ++i) {
    methods_[i].latency.AppendSeries(out, "kvpool_master_rpc_latency_seconds",
                                     fmt::format("method=\"{}\"", RpcMethodName(static_cast<RpcMethod>(i))));
  }
}

}  // namespace kvpool::master
