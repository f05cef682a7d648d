#include "master/rpc_metrics.h"

#include <fmt/format.h>

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
  m.latency_ns_sum.fetch_add(static_cast<uint64_t>(latency_ns), std::memory_order_relaxed);
  const double seconds = static_cast<double>(latency_ns) * 1e-9;
  size_t bucket = 0;
  while (bucket < kBucketSeconds.size() && seconds > kBucketSeconds[bucket]) ++bucket;
  m.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
}

void RpcMetrics::AppendPrometheus(std::string* out) const {
  auto append = [out](std::string_view text) { out->append(text); };
  append("# HELP kvpool_master_rpc_total RPCs served, by method.\n");
  append("# TYPE kvpool_master_rpc_total counter\n");
  for (size_t i = 0; i < methods_.size(); ++i) {
    append(fmt::format("kvpool_master_rpc_total{{method=\"{}\"}} {}\n",
                       RpcMethodName(static_cast<RpcMethod>(i)),
                       methods_[i].calls.load(std::memory_order_relaxed)));
  }
  append("# HELP kvpool_master_rpc_keys_total Keys (batch items) carried by RPCs, by method.\n");
  append("# TYPE kvpool_master_rpc_keys_total counter\n");
  for (size_t i = 0; i < methods_.size(); ++i) {
    append(fmt::format("kvpool_master_rpc_keys_total{{method=\"{}\"}} {}\n",
                       RpcMethodName(static_cast<RpcMethod>(i)),
                       methods_[i].keys.load(std::memory_order_relaxed)));
  }
  append("# HELP kvpool_master_rpc_latency_seconds Time the master spent serving an RPC.\n");
  append("# TYPE kvpool_master_rpc_latency_seconds histogram\n");
  for (size_t i = 0; i < methods_.size(); ++i) {
    const PerMethod& m = methods_[i];
    const std::string_view name = RpcMethodName(static_cast<RpcMethod>(i));
    uint64_t cumulative = 0;
    for (size_t b = 0; b < m.buckets.size(); ++b) {
      cumulative += m.buckets[b].load(std::memory_order_relaxed);
      std::string le = b < kBucketSeconds.size() ? fmt::format("{}", kBucketSeconds[b]) : "+Inf";
      append(fmt::format("kvpool_master_rpc_latency_seconds_bucket{{method=\"{}\",le=\"{}\"}} {}\n",
                         name, le, cumulative));
    }
    append(fmt::format("kvpool_master_rpc_latency_seconds_sum{{method=\"{}\"}} {:.9f}\n", name,
                       static_cast<double>(m.latency_ns_sum.load(std::memory_order_relaxed)) * 1e-9));
    append(fmt::format("kvpool_master_rpc_latency_seconds_count{{method=\"{}\"}} {}\n", name,
                       cumulative));
  }
}

}  // namespace kvpool::master
