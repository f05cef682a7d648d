#include "transfer/transfer_engine.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"
#include "common/prometheus_text.h"
#include "transfer/batch_state.h"
#include "transfer/shm_transport.h"
#include "transfer/tcp_transport.h"
#include "transfer/transport.h"
#include "transfer/ucx_transport.h"

namespace kvpool::transfer {
namespace {

bool SameEndpoint(const SegmentEndpoint& a, const SegmentEndpoint& b) {
  return a.segment_id == b.segment_id && a.served_id() == b.served_id() && a.store_id == b.store_id &&
         a.host_id == b.host_id &&
         a.tcp_address == b.tcp_address && a.shm_socket == b.shm_socket && a.size == b.size;
}

class BatchHandle final : public TransferBatch {
 public:
  explicit BatchHandle(std::shared_ptr<BatchState> state) : state_(std::move(state)) {}
  ~BatchHandle() override {
    Status ignored = state_->Wait(std::chrono::steady_clock::time_point::min());
    (void)ignored;
  }
  Status Wait(std::chrono::steady_clock::time_point deadline) override { return state_->Wait(deadline); }
  bool Done() const override { return state_->Done(); }
  const std::vector<Status>& results() const override { return state_->results(); }

 private:
  std::shared_ptr<BatchState> state_;
};

}  // namespace

struct TransferEngine::Impl {
  struct Route {
    SegmentEndpoint endpoint;
    std::shared_ptr<SegmentChannel> channel;
    // A segment that went over tcp because UCX could not reach its store asks again from
    // then on (the store may have restarted with UCX); never, when unset.
    std::chrono::steady_clock::time_point retry_ucx_at{};
  };
  static constexpr std::chrono::seconds kUcxRetryInterval{60};

  explicit Impl(const TransferOptions& o)
      : options(o), host_id(LocalHostId()), shm(o), tcp(o) {
    if (!o.ucx.enabled) return;
    auto started = UcxTransport::Start(o, &tcp);
    if (started.ok()) {
      ucx = std::move(started.value());
      spdlog::info("transfer: stores that serve UCX are reached over it: {}", ucx->Describe());
    } else {
      spdlog::warn("transfer: UCX is off, stores are reached over tcp: {}", started.status().message());
    }
  }

  const TransferOptions options;
  const std::string host_id;
  ShmTransport shm;
  TcpTransport tcp;
  std::unique_ptr<UcxTransport> ucx;  // null unless options.ucx.enabled and UCX started
  TransferMetrics metrics;

  // Declared after the transports: channels die before the io threads they use.
  mutable std::mutex mu;
  std::unordered_map<uint64_t, Route> routes;

  std::mutex memory_mu;
  std::map<const void*, std::pair<size_t, int>> registered;  // addr -> (length, count)
};

TransferEngine::TransferEngine(TransferOptions options) : impl_(std::make_unique<Impl>(options)) {}

TransferEngine::~TransferEngine() = default;

Status TransferEngine::RegisterMemory(void* addr, size_t length) {
  if (addr == nullptr || length == 0) return InvalidArgument("cannot register an empty range");
  std::lock_guard<std::mutex> lock(impl_->memory_mu);
  auto& entry = impl_->registered[addr];
  entry.first = std::max(entry.first, length);
  entry.second++;
  return Status::Ok();
}

Status TransferEngine::UnregisterMemory(void* addr) {
  std::lock_guard<std::mutex> lock(impl_->memory_mu);
  auto it = impl_->registered.find(addr);
  if (it == impl_->registered.end()) return NotFound(fmt::format("memory at {} is not registered", addr));
  if (--it->second.second == 0) impl_->registered.erase(it);
  return Status::Ok();
}

Status TransferEngine::OpenSegment(const SegmentEndpoint& endpoint) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->routes.find(endpoint.segment_id);
    if (it != impl_->routes.end() && SameEndpoint(it->second.endpoint, endpoint) && !it->second.channel->broken() &&
        (it->second.retry_ucx_at == std::chrono::steady_clock::time_point{} ||
         std::chrono::steady_clock::now() < it->second.retry_ucx_at)) {
      return Status::Ok();
    }
  }
  std::shared_ptr<SegmentChannel> channel;
  // A tenant never maps a segment: the whole segment, every namespace's bytes, would be its
  // to read. It reads over tcp, inside the master's grants.
  const bool tenant = impl_->options.secret && impl_->options.secret->tenant();
  if (impl_->options.allow_shm && !tenant && endpoint.host_id == impl_->host_id && !endpoint.shm_socket.empty()) {
    auto shm = impl_->shm.Open(endpoint);
    if (shm.ok()) {
      channel = std::move(shm.value());
    } else {
      spdlog::info("transfer: segment {} via tcp: shm unavailable ({})", endpoint.segment_id,
                   shm.status().ToString());
    }
  }
  std::chrono::steady_clock::time_point retry_ucx_at{};
  if (!channel && impl_->ucx && !tenant) {
    auto ucx = impl_->ucx->Open(endpoint);
    if (ucx.ok()) {
      channel = std::move(ucx.value());
    } else {
      spdlog::info("transfer: segment {} via tcp: ucx unavailable ({})", endpoint.segment_id,
                   ucx.status().ToString());
      retry_ucx_at = std::chrono::steady_clock::now() + Impl::kUcxRetryInterval;
    }
  }
  if (!channel) {
    auto tcp = impl_->tcp.Open(endpoint);
    if (!tcp.ok()) return tcp.status();
    channel = std::move(tcp.value());
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->routes[endpoint.segment_id] = {endpoint, std::move(channel), retry_ucx_at};
  return Status::Ok();
}

void TransferEngine::CloseSegment(uint64_t segment_id) {
  std::shared_ptr<SegmentChannel> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->routes.find(segment_id);
  if (it == impl_->routes.end()) return;
  dropped = std::move(it->second.channel);
  impl_->routes.erase(it);
}

std::unique_ptr<TransferBatch> TransferEngine::Submit(std::span<const TransferRequest> requests) {
  auto batch = std::make_shared<BatchState>(requests.size());
  // Valid requests grouped by channel, in submission order within each channel.
  std::vector<std::pair<std::shared_ptr<SegmentChannel>, std::vector<ChannelOp>>> groups;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (size_t i = 0; i < requests.size(); ++i) {
      const TransferRequest& r = requests[i];
      auto it = impl_->routes.find(r.segment_id);
      if (it == impl_->routes.end()) {
        batch->FinishPart(i, Stale(fmt::format("segment {} is not open", r.segment_id)));
        continue;
      }
      const auto& route = it->second;
      uint64_t size = route.channel->size() > 0 ? route.channel->size() : route.endpoint.size;
      if (r.checksum != nullptr && (r.kind != OpKind::kRead || r.length > kMaxHashedReadBytes)) {
        batch->FinishPart(i, InvalidArgument(fmt::format("only reads of at most {} bytes are hashed as they land; "
                                                         "this is a {} of {} bytes",
                                                         kMaxHashedReadBytes,
                                                         r.kind == OpKind::kRead ? "read" : "write", r.length)));
        continue;
      }
      if (r.length == 0) {
        if (r.checksum != nullptr) *r.checksum = Checksum(nullptr, 0);
        batch->FinishPart(i, Status::Ok());
        continue;
      }
      if (r.local == nullptr) {
        batch->FinishPart(i, InvalidArgument("request has no local buffer"));
        continue;
      }
      if (r.from_tier && r.kind != OpKind::kRead) {
        batch->FinishPart(i, InvalidArgument("the SSD tier's file is only read through the transfer engine"));
        continue;
      }
      // A tier read's bounds are the file's, which the channel (shm) or the store (tcp) checks.
      if (!r.from_tier && size > 0 && (r.offset > size || r.length > size - r.offset)) {
        batch->FinishPart(i, InvalidArgument(fmt::format("[{}, +{}) is outside segment {} of {} bytes",
                                                         r.offset, r.length, r.segment_id, size)));
        continue;
      }
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return g.first == route.channel; });
      if (group == groups.end()) {
        groups.emplace_back(route.channel, std::vector<ChannelOp>{});
        group = groups.end() - 1;
      }
      group->second.push_back(
          {r.kind, static_cast<char*>(r.local), r.offset, r.length, i, r.grant, r.checksum, r.from_tier});
    }
  }
  for (auto& [channel, ops] : groups) {
    for (const ChannelOp& op : ops) {
      (op.kind == OpKind::kRead ? impl_->metrics.read_bytes : impl_->metrics.write_bytes).ObserveSteps(op.length);
    }
    channel->Submit(ops, batch);
  }
  return std::make_unique<BatchHandle>(std::move(batch));
}

Status TransferEngine::Transfer(std::span<const TransferRequest> requests,
                                std::chrono::steady_clock::time_point deadline,
                                std::vector<Status>* per_request) {
  auto batch = Submit(requests);
  Status status = batch->Wait(deadline);
  if (per_request != nullptr) *per_request = batch->results();
  return status;
}

const TransferMetrics& TransferEngine::metrics() const { return impl_->metrics; }

void TransferMetrics::AppendPrometheus(std::span<const TransferMetrics* const> engines, std::string* out,
                                       std::string_view labels) {
  TransferMetrics sum;
  for (const TransferMetrics* e : engines) {
    sum.read_bytes.Add(e->read_bytes);
    sum.write_bytes.Add(e->write_bytes);
  }
  constexpr const char* kName = "kvpool_transfer_request_bytes";
  AppendHeader(out, kName, "histogram", "Bytes of each read or write request given to the transfer engine.");
  sum.read_bytes.AppendSeries(out, kName, JoinLabels(labels, "op=\"read\""));
  sum.write_bytes.AppendSeries(out, kName, JoinLabels(labels, "op=\"write\""));
}

Result<MappedRange> TransferEngine::MapForRead(uint64_t segment_id, uint64_t offset, uint64_t length) {
  std::shared_ptr<SegmentChannel> channel;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->routes.find(segment_id);
    if (it == impl_->routes.end()) return Stale(fmt::format("segment {} is not open", segment_id));
    channel = it->second.channel;
  }
  if (channel->transport_name() != "shm") {
    return Unavailable(fmt::format("segment {} is reached over {}, not mapped", segment_id, channel->transport_name()));
  }
  std::shared_ptr<const SegmentMapping> mapping = channel->Mapping();
  if (!mapping) return Stale(fmt::format("segment {} is no longer served", segment_id));
  const uint64_t size = mapping->bytes().size();
  if (offset > size || length > size - offset) {
    return InvalidArgument(fmt::format("[{}, +{}) is outside segment {} of {} bytes", offset, length, segment_id, size));
  }
  return MappedRange{mapping, mapping->bytes().data() + offset, length};
}

std::string TransferEngine::TransportFor(uint64_t segment_id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->routes.find(segment_id);
  return it == impl_->routes.end() ? "" : std::string(it->second.channel->transport_name());
}

}  // namespace kvpool::transfer
