// The replay's GPU handoff (KVPOOL_CUDA; replay_no_cuda.cc otherwise): one HandoffPipeline per
// (stage GPU, decode GPU) pair, made on first use and kept. Per request, for every stage and
// every GPU holding decode DCP ranks, that pair's pipeline gathers the stage's layers of those
// ranks' tokens into pieces of at most max_write_bytes, copies them over and scatters them;
// Transfer waits on each pair's completion event. The device block tables are kept and reloaded
// per request (no allocation per request once they are large enough).
#include <cuda_runtime.h>

#include <map>
#include <utility>

#include <fmt/format.h>

#include "handoff/handoff_copy_cuda.h"
#include "engine/kv_handoff.h"

namespace kvpool::engine {
namespace {

class GpuKvHandoff final : public KvHandoff {
 public:
  explicit GpuKvHandoff(uint64_t max_write_bytes) : max_write_bytes_(max_write_bytes) {}
  ~GpuKvHandoff() override {
    for (auto& [devices, done] : events_) {
      cudaSetDevice(devices.second);
      cudaEventDestroy(done);
    }
  }

  Result<uint64_t> Transfer(const KvHandoffRequest& r) override {
    auto layouts = HandoffLayoutsOf(r);
    if (!layouts.ok()) return layouts.status();
    if (r.stage_devices.size() != r.stage_caches.size() || r.decode_devices.size() != r.decode_caches.size()) {
      return InvalidArgument("gpu handoff: every cache must be in device memory");
    }
    if (r.tokens == 0) return uint64_t{0};
    handoff::HandoffPlanOptions po;
    po.max_write_bytes = max_write_bytes_;
    auto plan = handoff::PlanHandoff(layouts->prefill, layouts->decode, 0, r.tokens, po);
    if (!plan.ok()) return plan.status();
    // Every table first, so the stages' transfers start back to back.
    for (size_t d = 0; d < r.decode_caches.size(); ++d) {
      KVPOOL_RETURN_IF_ERROR(
          Load(decode_tables_, d, *r.decode_caches[d], r.decode_block_tables[d], r.decode_devices[d]));
    }
    for (size_t s = 0; s < r.stage_caches.size(); ++s) {
      KVPOOL_RETURN_IF_ERROR(Load(stage_tables_, s, *r.stage_caches[s], r.stage_block_tables[s], r.stage_devices[s]));
    }
    // Per decode GPU, its ranks' tables (null for ranks on other GPUs).
    std::map<int, std::vector<const handoff::DeviceKvTable*>> by_device;
    for (size_t d = 0; d < r.decode_caches.size(); ++d) {
      auto& ranks = by_device[r.decode_devices[d]];
      ranks.resize(r.decode_caches.size(), nullptr);
      ranks[d] = decode_tables_[d].get();
    }
    std::vector<cudaEvent_t> pending;
    Status failed;
    for (uint32_t s = 0; s < r.stage_caches.size() && failed.ok(); ++s) {
      for (const auto& [device, ranks] : by_device) {
        auto link = LinkFor(r.stage_devices[s], device);
        if (!link.ok()) {
          failed = link.status();
          break;
        }
        failed = link->first->Transfer(*plan, s, *stage_tables_[s], ranks, link->second);
        if (!failed.ok()) break;
        pending.push_back(link->second);
      }
    }
    // Wait for whatever was enqueued, even after a failure: nothing may still be writing into
    // decode's cache when the caller frees or reuses its blocks, nor reading the tables when the
    // next request reloads them.
    for (cudaEvent_t done : pending) {
      const cudaError_t e = cudaEventSynchronize(done);
      if (e != cudaSuccess && failed.ok()) failed = Internal(fmt::format("gpu handoff: {}", cudaGetErrorString(e)));
    }
    if (!failed.ok()) return failed;
    return layouts->bytes;
  }

  const char* name() const override { return "gpu"; }

 private:
  // tables[i] <- (cache, table) on `device` (DeviceKvTable::Load), growing `tables` as needed.
  static Status Load(std::vector<std::unique_ptr<handoff::DeviceKvTable>>& tables, size_t i,
                     const connector::PagedKvCache& cache, std::span<const connector::BlockId> table, int device) {
    if (tables.size() <= i) tables.resize(i + 1);
    return handoff::DeviceKvTable::Load(tables[i], cache, table, device);
  }

  // The pipeline from one stage GPU to one decode GPU and its completion event (one request at a
  // time per pair, so one event suffices).
  Result<std::pair<handoff::HandoffPipeline*, cudaEvent_t>> LinkFor(int stage_device, int decode_device) {
    const std::pair<int, int> key{stage_device, decode_device};
    auto it = pipelines_.find(key);
    if (it == pipelines_.end()) {
      auto pipeline = handoff::HandoffPipeline::Create(stage_device, decode_device);
      if (!pipeline.ok()) return pipeline.status();
      cudaEvent_t done = nullptr;
      cudaSetDevice(decode_device);
      if (const cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); e != cudaSuccess) {
        return Internal(fmt::format("gpu handoff: create event: {}", cudaGetErrorString(e)));
      }
      events_[key] = done;
      it = pipelines_.emplace(key, std::move(pipeline).value()).first;
    }
    return std::make_pair(it->second.get(), events_.at(key));
  }

  const uint64_t max_write_bytes_;
  // The current request's device tables, per decode rank and per stage, reloaded per request.
  std::vector<std::unique_ptr<handoff::DeviceKvTable>> decode_tables_, stage_tables_;
  std::map<std::pair<int, int>, std::unique_ptr<handoff::HandoffPipeline>> pipelines_;
  std::map<std::pair<int, int>, cudaEvent_t> events_;
};

}  // namespace

Result<std::unique_ptr<KvHandoff>> NewGpuKvHandoff(uint64_t max_write_bytes) {
  if (handoff::HandoffCudaDeviceCount() == 0) return Unavailable("gpu handoff: no CUDA device");
  return std::unique_ptr<KvHandoff>(new GpuKvHandoff(max_write_bytes));
}

}  // namespace kvpool::engine
