#include "transfer/ucx_transport.h"

#include <atomic>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/checksum.h"
#include "transfer/auth_handshake.h"
#include "transfer/socket_util.h"
#include "transfer/tcp_frame.h"
#include "transfer/ucx_key.h"
#include "transfer/ucx_worker.h"

namespace kvpool::transfer {

bool UcxBuilt() { return true; }

namespace {

// Asks the store at endpoint.tcp_address for the segment's UCX key: one frame of op 4 on a
// connection of its own, after proving the pool's secret when we hold it (control path,
// bounded by connect_timeout).
Result<UcxSegmentKey> FetchKey(const SegmentEndpoint& endpoint, const TransferOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  const std::string& peer = endpoint.tcp_address;
  auto fd = ConnectTcp(peer, deadline);
  if (!fd.ok()) return fd.status();
  uint8_t header[ResponseHeader::kSize];
  ResponseHeader response;
  auto read_response = [&]() -> Status {
    if (!ReadExactly(fd->get(), header, sizeof(header), deadline)) {
      return Unavailable(fmt::format("{} did not answer the UCX key request in time", peer));
    }
    if (!DecodeResponseHeader(header, &response).ok()) {
      if (StartsLikeChallenge(header)) {
        return Unauthenticated(fmt::format("{} asks for the pool's secret and this client has none", peer));
      }
      return Unavailable(fmt::format("{} answered the UCX key request with a malformed header", peer));
    }
    return Status::Ok();
  };
  if (options.secret) {
    KVPOOL_RETURN_IF_ERROR(ProveSecret(fd->get(), *options.secret, kTcpPurpose, peer, deadline));
    KVPOOL_RETURN_IF_ERROR(read_response());
    if (response.request_id != 0 || response.status != StatusCode::kOk) {
      return Unauthenticated(fmt::format("{} refused this client's proof of the pool's secret", peer));
    }
  }
  RequestHeader request;
  request.op = FrameOp::kUcxKey;
  request.request_id = 1;
  request.segment_id = endpoint.served_id();
  request.length = kUcxKeyBytes;
  uint8_t out[RequestHeader::kSize];
  EncodeRequestHeader(request, out);
  if (!WriteExactly(fd->get(), out, sizeof(out), deadline)) {
    return Unavailable(fmt::format("{} went away before the UCX key request was sent", peer));
  }
  KVPOOL_RETURN_IF_ERROR(read_response());
  if (response.status != StatusCode::kOk) {
    return Status(response.status, fmt::format("{} serves no UCX key for segment {} (status {})", peer,
                                               endpoint.served_id(), static_cast<int>(response.status)));
  }
  if (response.op != FrameOp::kUcxKey || response.request_id != 1 || response.length != kUcxKeyBytes) {
    return Unavailable(fmt::format("{} answered the UCX key request with another frame", peer));
  }
  std::vector<uint8_t> reply(kUcxKeyBytes);
  if (!ReadExactly(fd->get(), reply.data(), reply.size(), deadline)) {
    return Unavailable(fmt::format("{} did not send the whole UCX key in time", peer));
  }
  UcxSegmentKey key;
  Status decoded = DecodeUcxKey(reply, &key);
  if (!decoded.ok()) return Unavailable(fmt::format("{} sent a bad UCX key: {}", peer, decoded.message()));
  if (endpoint.size > key.size) {
    return Unavailable(fmt::format("{} registered {} bytes of segment {} with UCX, not {}", peer, key.size,
                                   endpoint.served_id(), endpoint.size));
  }
  return key;
}

// Whether UCX_TLS names shared-memory transports only: they cannot detect a dead peer, so
// endpoints are made without asking for it (asking would fail, and UCX would log an error).
bool SharedMemoryOnly(const std::string& transports) {
  if (transports.empty()) return false;
  for (size_t at = 0; at <= transports.size();) {
    const size_t comma = std::min(transports.find(',', at), transports.size());
    const std::string tl = transports.substr(at, comma - at);
    if (tl != "sm" && tl != "shm" && tl != "posix" && tl != "sysv" && tl != "cma" && tl != "knem" && tl != "xpmem" &&
        tl != "self") {
      return false;
    }
    at = comma + 1;
  }
  return true;
}

struct RemoteSegment;

const ucp_request_param_t kNoCallback{};

// One endpoint to one store's worker. Worker thread only, but `failed`.
struct Peer {
  std::string address;  // the store worker's, as bytes
  std::string store;    // its tcp address, for messages
  ucp_ep_h ep = nullptr;
  std::atomic<bool> failed{false};
  std::unordered_set<RemoteSegment*> segments;  // their rkeys die before the endpoint
};

// A segment reached through a peer. Worker thread only.
struct RemoteSegment {
  std::shared_ptr<Peer> peer;
  ucp_rkey_h rkey = nullptr;
  uint64_t base = 0;
  ~RemoteSegment() {
    if (rkey != nullptr) ucp_rkey_destroy(rkey);
    peer->segments.erase(this);
  }
};

class UcxTransportImpl;

// The writes of one Submit to one peer: done once every put and the endpoint's flush after
// them have completed (a put's completion only frees its buffer; the flush says the bytes
// are in the store's memory).
struct WriteGroup {
  UcxTransportImpl* transport = nullptr;
  std::shared_ptr<BatchState> batch;
  std::vector<std::pair<size_t, Status>> writes;  // request index, first error
  size_t events_left = 0;                         // puts in flight + the flush

  void EventDone() {
    if (--events_left > 0) return;
    for (auto& [index, status] : writes) batch->FinishPart(index, status);
    delete this;
  }
};

// One read or put in flight: it holds a section of its batch's buffer gate from issue until
// UCX completes it, so the batch's Wait() cannot return while UCX may still touch them.
struct InFlight {
  UcxTransportImpl* transport = nullptr;
  std::shared_ptr<BatchState> batch;
  std::shared_ptr<Peer> peer;
  ChannelOp op;
  WriteGroup* group = nullptr;  // writes
  size_t write_slot = 0;
  void* request = nullptr;
};

class UcxChannel;

class UcxTransportImpl final : public UcxTransport {
 public:
  UcxTransportImpl(const TransferOptions& options, Transport* tcp, std::unique_ptr<UcxWorker> worker)
      : options_(options), tcp_(tcp), ucp_worker_(worker->worker()), worker_(std::move(worker)) {
    worker_->SetHooks([this] { CancelAbandoned(); }, [this] { return !in_flight_.empty() || flushes_ > 0; },
                      [this] { Shutdown(); });
  }
  // Stops the thread (it runs Shutdown last). worker_ reads null meanwhile: Shutdown and what
  // it calls use ucp_worker_.
  ~UcxTransportImpl() override { worker_.reset(); }

  std::string Describe() const override {
    return worker_->Describe();
  }

  Result<std::shared_ptr<SegmentChannel>> Open(const SegmentEndpoint& endpoint) override;

  UcxWorker* worker() { return worker_.get(); }

  // Worker thread: starts `ops` of `remote`'s segment.
  void Issue(RemoteSegment* remote, std::span<const ChannelOp> ops, const std::shared_ptr<BatchState>& batch,
             const std::shared_ptr<SegmentChannel>& tcp_channel);

 private:
  static void OnDone(void* request, ucs_status_t status, void* user_data) {
    auto* f = static_cast<InFlight*>(user_data);
    f->transport->in_flight_.erase(f);
    ucp_request_free(request);
    f->transport->Complete(f, status);
  }
  static void OnFlushed(void* request, ucs_status_t status, void* user_data) {
    ucp_request_free(request);
    auto* group = static_cast<WriteGroup*>(user_data);
    group->transport->flushes_--;
    FlushDone(group, status);
  }
  static void FlushDone(WriteGroup* group, ucs_status_t status);
  static void OnPeerError(void* arg, ucp_ep_h, ucs_status_t status);

  void Complete(InFlight* f, ucs_status_t status);
  // Worker thread: progresses until `request` completes (then frees it) or the deadline.
  ucs_status_t WaitFor(ucs_status_ptr_t request, std::chrono::steady_clock::time_point deadline);
  void FailPeer(const std::shared_ptr<Peer>& peer, std::string_view why);
  void CancelAbandoned();
  void Shutdown();

  const TransferOptions options_;
  Transport* const tcp_;
  // Worker thread only, below.
  std::unordered_map<std::string, std::shared_ptr<Peer>> peers_;  // by worker address
  std::unordered_set<InFlight*> in_flight_;
  std::vector<void*> closing_;  // endpoint closes UCX has not finished
  size_t flushes_ = 0;
  const ucp_worker_h ucp_worker_;
  // Last: its thread stops (running Shutdown) before the members above go.
  std::unique_ptr<UcxWorker> worker_;
};

class UcxChannel final : public SegmentChannel, public std::enable_shared_from_this<UcxChannel> {
 public:
  UcxChannel(UcxTransportImpl* transport, std::shared_ptr<RemoteSegment> remote, std::shared_ptr<Peer> peer,
             std::shared_ptr<SegmentChannel> tcp, uint64_t size)
      : transport_(transport),
        worker_(transport->worker()),
        remote_(std::move(remote)),
        peer_(std::move(peer)),
        tcp_(std::move(tcp)),
        size_(size) {}
  ~UcxChannel() override {
    // The key dies on the worker thread, where every UCX call runs (or, posted while the
    // worker stops, with its queue, after Shutdown destroyed every key).
    worker_->Post([remote = std::move(remote_)]() mutable { remote.reset(); });
  }

  std::string_view transport_name() const override { return "ucx"; }
  uint64_t size() const override { return size_; }
  bool broken() const override { return peer_->failed.load(std::memory_order_acquire); }

  void Submit(std::span<const ChannelOp> ops, const std::shared_ptr<BatchState>& batch) override {
    std::vector<ChannelOp> via_tcp, via_ucx;
    const bool failed = broken();
    for (const ChannelOp& op : ops) (op.from_tier || failed ? via_tcp : via_ucx).push_back(op);
    if (!via_tcp.empty()) tcp_->Submit(via_tcp, batch);
    if (via_ucx.empty()) return;
    worker_->Post([self = shared_from_this(), ops = std::move(via_ucx), batch] {
      self->transport_->Issue(self->remote_.get(), ops, batch, self->tcp_);
    });
  }

 private:
  UcxTransportImpl* const transport_;
  UcxWorker* const worker_;  // the transport's: channels die before it (the engine's routes do)
  std::shared_ptr<RemoteSegment> remote_;  // touched on the worker thread only
  const std::shared_ptr<Peer> peer_;
  const std::shared_ptr<SegmentChannel> tcp_;
  const uint64_t size_;
};

Result<std::shared_ptr<SegmentChannel>> UcxTransportImpl::Open(const SegmentEndpoint& endpoint) {
  if (options_.secret && options_.secret->tenant()) {
    return PermissionDenied("a tenant reaches stores over tcp, inside the master's grants");
  }
  auto key = FetchKey(endpoint, options_);
  if (!key.ok()) return key.status();
  auto tcp = tcp_->Open(endpoint);
  if (!tcp.ok()) return tcp.status();
  const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
  Status status;
  std::shared_ptr<Peer> peer;
  std::shared_ptr<RemoteSegment> remote;
  worker_->Call([&] {
    std::string address(key->worker_address.begin(), key->worker_address.end());
    auto& slot = peers_[address];
    if (!slot || slot->failed.load()) {
      auto fresh = std::make_shared<Peer>();
      fresh->address = address;
      fresh->store = endpoint.tcp_address;
      ucp_ep_params_t params{};
      params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
      params.address = reinterpret_cast<const ucp_address_t*>(key->worker_address.data());
      const bool detect = !SharedMemoryOnly(options_.ucx.transports);
      params.err_mode = detect ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
      params.err_handler.cb = &UcxTransportImpl::OnPeerError;
      params.err_handler.arg = fresh.get();
      ucs_status_t s = ucp_ep_create(worker_->worker(), &params, &fresh->ep);
      if (s == UCS_ERR_UNREACHABLE && detect) {
        // Only shared-memory transports reach this store (UCX_TLS from the environment), and
        // they cannot detect a dead peer: a request to a store that died ends at its batch's
        // deadline instead.
        params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        s = ucp_ep_create(worker_->worker(), &params, &fresh->ep);
      }
      if (s != UCS_OK) {
        peers_.erase(address);
        status = UcxStatus(fmt::format("creating a UCX endpoint to {}", endpoint.tcp_address), s);
        return;
      }
      // Wait until the endpoint is connected (a flush completes after the wireup): a store
      // that cannot be reached over UCX is found now and the segment goes over tcp, and the
      // endpoint is never closed mid-wireup (which UCX 1.13 may answer with an abort in the
      // store: README.md, "UCX").
      s = WaitFor(ucp_ep_flush_nbx(fresh->ep, &kNoCallback), deadline);
      if (s != UCS_OK) {
        status = UcxStatus(fmt::format("connecting over UCX to {}", endpoint.tcp_address), s);
        FailPeer(fresh, "it did not connect in time");
        peers_.erase(address);
        return;
      }
      slot = std::move(fresh);
    }
    peer = slot;
    remote = std::make_shared<RemoteSegment>();
    remote->peer = peer;
    remote->base = key->base;
    ucs_status_t s = ucp_ep_rkey_unpack(peer->ep, key->rkey.data(), &remote->rkey);
    if (s != UCS_OK) {
      remote->rkey = nullptr;
      status = UcxStatus(fmt::format("unpacking the UCX key of segment {} from {}", endpoint.served_id(),
                                     endpoint.tcp_address),
                         s);
      remote.reset();  // (its destructor leaves the peer's set untouched: it was never added)
      return;
    }
    peer->segments.insert(remote.get());
  });
  if (!status.ok()) return status;
  const uint64_t size = endpoint.size > 0 ? endpoint.size : key->size;
  return std::shared_ptr<SegmentChannel>(
      std::make_shared<UcxChannel>(this, std::move(remote), std::move(peer), std::move(tcp.value()), size));
}

void UcxTransportImpl::Issue(RemoteSegment* remote, std::span<const ChannelOp> ops,
                             const std::shared_ptr<BatchState>& batch,
                             const std::shared_ptr<SegmentChannel>& tcp_channel) {
  const std::shared_ptr<Peer>& peer = remote->peer;
  if (peer->failed.load() || remote->rkey == nullptr) {  // failed since Submit looked
    tcp_channel->Submit(ops, batch);
    return;
  }
  WriteGroup* group = nullptr;
  for (const ChannelOp& op : ops) {
    if (op.kind == OpKind::kWrite) {
      if (group == nullptr) group = new WriteGroup{this, batch, {}, 1};
      group->writes.emplace_back(op.index, Status::Ok());
    }
  }
  size_t write_slot = 0;
  for (const ChannelOp& op : ops) {
    const bool write = op.kind == OpKind::kWrite;
    const size_t slot = write ? write_slot++ : 0;
    if (!batch->buffers().Enter()) {  // abandoned already: touch nothing
      if (write) {
        group->writes[slot].second = Timeout("abandoned at its deadline before it started");
      } else {
        batch->FinishPart(op.index, Timeout("abandoned at its deadline before it started"));
      }
      continue;
    }
    auto* f = new InFlight{this, batch, peer, op, write ? group : nullptr, slot, nullptr};
    if (write) group->events_left++;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &UcxTransportImpl::OnDone;
    param.user_data = f;
    const uint64_t at = remote->base + op.offset;
    ucs_status_ptr_t r = write ? ucp_put_nbx(peer->ep, op.local, op.length, at, remote->rkey, &param)
                               : ucp_get_nbx(peer->ep, op.local, op.length, at, remote->rkey, &param);
    if (r == nullptr) {
      Complete(f, UCS_OK);
    } else if (UCS_PTR_IS_ERR(r)) {
      Complete(f, UCS_PTR_STATUS(r));
    } else {
      f->request = r;
      in_flight_.insert(f);
    }
  }
  if (group == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransportImpl::OnFlushed;
  param.user_data = group;
  ucs_status_ptr_t r = peer->ep != nullptr ? ucp_ep_flush_nbx(peer->ep, &param) : UCS_STATUS_PTR(UCS_ERR_CANCELED);
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    FlushDone(group, UCS_PTR_STATUS(r));
  } else {
    flushes_++;
  }
}

void UcxTransportImpl::FlushDone(WriteGroup* group, ucs_status_t status) {
  if (status != UCS_OK) {
    for (auto& [index, s] : group->writes) {
      if (s.ok()) s = UcxStatus("flushing writes to the store", status);
    }
  }
  group->EventDone();
}

void UcxTransportImpl::Complete(InFlight* f, ucs_status_t status) {
  std::unique_ptr<InFlight> owned(f);
  Status result = status == UCS_OK ? Status::Ok() : UcxStatus("a one-sided transfer", status);
  if (status == UCS_OK && f->op.checksum != nullptr) {
    *f->op.checksum = Checksum(f->op.local, f->op.length);  // still inside the section
  }
  f->batch->buffers().Exit();
  // The endpoint closes on the next turn (CancelAbandoned), not here: an Issue loop may be
  // using it.
  if (status != UCS_OK) f->peer->failed.store(true, std::memory_order_release);
  if (f->group != nullptr) {
    if (!result.ok() && f->group->writes[f->write_slot].second.ok()) f->group->writes[f->write_slot].second = result;
    f->group->EventDone();
  } else {
    f->batch->FinishPart(f->op.index, result);
  }
}

void UcxTransportImpl::OnPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  // Inside UCX's progress: mark only; CancelAbandoned closes the endpoint after it.
  auto* peer = static_cast<Peer*>(arg);
  spdlog::warn("ucx: the endpoint to store {} failed ({}); its segments go over tcp until opened again",
               peer->store, ucs_status_string(status));
  peer->failed.store(true, std::memory_order_release);
}

ucs_status_t UcxTransportImpl::WaitFor(ucs_status_ptr_t request, std::chrono::steady_clock::time_point deadline) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t s;
  while ((s = ucp_request_check_status(request)) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(ucp_worker_);
  }
  if (s == UCS_INPROGRESS) {
    closing_.push_back(request);  // freed once UCX finishes it
    return UCS_ERR_TIMED_OUT;
  }
  ucp_request_free(request);
  return s;
}

void UcxTransportImpl::FailPeer(const std::shared_ptr<Peer>& peer, std::string_view why) {
  peer->failed.store(true, std::memory_order_release);
  if (peer->ep == nullptr) return;
  spdlog::info("ucx: closing the endpoint to store {}: {}", peer->store, why);
  for (RemoteSegment* segment : peer->segments) {
    if (segment->rkey != nullptr) ucp_rkey_destroy(segment->rkey);
    segment->rkey = nullptr;
  }
  // Force: cancels whatever is in flight on it (each completes with an error), with no word
  // from the store, which may be dead or hung.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(peer->ep, &param);
  peer->ep = nullptr;
  if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing_.push_back(r);
  auto it = peers_.find(peer->address);
  if (it != peers_.end() && it->second == peer) peers_.erase(it);
}

void UcxTransportImpl::CancelAbandoned() {
  std::vector<std::shared_ptr<Peer>> to_fail;
  for (InFlight* f : in_flight_) {
    if (f->batch->buffers().closed() || (f->peer->failed.load() && f->peer->ep != nullptr)) to_fail.push_back(f->peer);
  }
  for (auto& [address, peer] : peers_) {
    if (peer->failed.load() && peer->ep != nullptr) to_fail.push_back(peer);
  }
  for (const auto& peer : to_fail) FailPeer(peer, "a batch was abandoned at its deadline, or the store failed");
  std::erase_if(closing_, [](void* r) {
    if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
    ucp_request_free(r);
    return true;
  });
}

void UcxTransportImpl::Shutdown() {
  std::vector<std::shared_ptr<Peer>> all;
  for (auto& [address, peer] : peers_) all.push_back(peer);
  // Healthy endpoints close gracefully (the store learns it from us), within a second.
  const auto graceful = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (const auto& peer : all) {
    if (peer->failed.load() || peer->ep == nullptr || !in_flight_.empty()) continue;
    for (RemoteSegment* segment : peer->segments) {
      if (segment->rkey != nullptr) ucp_rkey_destroy(segment->rkey);
      segment->rkey = nullptr;
    }
    ucp_ep_h ep = std::exchange(peer->ep, nullptr);
    peer->failed.store(true);
    WaitFor(ucp_ep_close_nbx(ep, &kNoCallback), graceful);
  }
  for (const auto& peer : all) FailPeer(peer, "the transfer engine is stopping");
  // Every request completes once its endpoint is closed; wait for UCX to say so (bounded:
  // a UCX that never answers must not hang the process's exit).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!in_flight_.empty() || flushes_ > 0 || !closing_.empty()) && std::chrono::steady_clock::now() < give_up) {
    ucp_worker_progress(ucp_worker_);
    CancelAbandoned();
  }
  if (!in_flight_.empty() || flushes_ > 0) {
    spdlog::error("ucx: {} requests and {} flushes still in flight at shutdown", in_flight_.size(), flushes_);
  }
}

}  // namespace

Result<std::unique_ptr<UcxTransport>> UcxTransport::Start(const TransferOptions& options, Transport* tcp) {
  auto worker = UcxWorker::Start("ucx-client", options.ucx);
  if (!worker.ok()) return worker.status();
  return std::unique_ptr<UcxTransport>(new UcxTransportImpl(options, tcp, std::move(worker.value())));
}

}  // namespace kvpool::transfer
