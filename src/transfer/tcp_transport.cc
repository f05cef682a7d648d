#include "transfer/tcp_transport.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace kvpool::transfer {

static_assert(kMaxHashedReadBytes <= kMaxFramePayload, "a read to hash must fit one frame");

// The connections to one peer address. Closed connections are replaced lazily, on the next
// request that needs the peer.
class TcpPeer {
 public:
  TcpPeer(std::string address, SocketAddress resolved, std::vector<EventLoop*> loops,
          std::vector<std::shared_ptr<TcpConnection::Registry>> registries, int connections,
          TcpConnectionOptions options)
      : address_(std::move(address)),
        resolved_(resolved),
        loops_(std::move(loops)),
        registries_(std::move(registries)),
        slots_(static_cast<size_t>(std::max(1, connections))),
        options_(options),
        first_loop_(std::hash<std::string>()(address_)) {}

  // Open connections, one per slot, replacing any that closed.
  std::vector<std::shared_ptr<TcpConnection>> Connections() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i] || slots_[i]->closed()) {
        size_t l = (first_loop_ + i) % loops_.size();
        slots_[i] = std::make_shared<TcpConnection>(loops_[l], registries_[l], address_, resolved_, options_);
        slots_[i]->Start();
      }
    }
    return slots_;
  }

  void CloseAll(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : slots_) {
      if (c) c->Close(why);
    }
  }

  const std::string& address() const { return address_; }

 private:
  const std::string address_;
  const SocketAddress resolved_;
  const std::vector<EventLoop*> loops_;
  const std::vector<std::shared_ptr<TcpConnection::Registry>> registries_;
  std::mutex mu_;
  std::vector<std::shared_ptr<TcpConnection>> slots_;
  const TcpConnectionOptions options_;
  const size_t first_loop_;
};

namespace {

class TcpChannel final : public SegmentChannel {
 public:
  TcpChannel(std::shared_ptr<TcpPeer> peer, uint64_t segment_id, uint64_t size, uint64_t chunk_bytes)
      : peer_(std::move(peer)), segment_id_(segment_id), size_(size), chunk_bytes_(chunk_bytes) {}

  std::string_view transport_name() const override { return "tcp"; }
  uint64_t size() const override { return size_; }

  void Submit(std::span<const ChannelOp> ops, const std::shared_ptr<BatchState>& batch) override {
    std::vector<std::shared_ptr<TcpConnection>> conns = peer_->Connections();
    std::vector<uint64_t> load(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) load[i] = conns[i]->outstanding_bytes();
    std::vector<std::vector<OutgoingFrame>> per_conn(conns.size());

    for (const ChannelOp& op : ops) {
      if (op.checksum != nullptr) {
        // A hash runs through the bytes in order: the whole op is one frame on one connection
        // (a batch to hash has many ops to spread instead).
        OutgoingFrame f = FrameOf(op, 0, op.length, batch);
        f.hash = std::make_unique<ChecksumStream>();
        f.checksum = op.checksum;
        PlaceOnLeastLoaded(std::move(f), load, per_conn);
        continue;
      }
      uint64_t parts = (op.length + chunk_bytes_ - 1) / chunk_bytes_;
      if (parts > 1) batch->ExpectParts(op.index, static_cast<uint32_t>(parts));
      for (uint64_t done = 0; done < op.length; done += chunk_bytes_) {
        PlaceOnLeastLoaded(FrameOf(op, done, std::min(chunk_bytes_, op.length - done), batch), load, per_conn);
      }
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      if (per_conn[i].empty() || conns[i]->Enqueue(per_conn[i])) continue;
      // The connection closed between Connections() and now: one retry on a fresh set.
      auto fresh = peer_->Connections();
      if (!fresh[i]->Enqueue(per_conn[i])) {
        // A refusal (the store asks for a secret we lack) keeps its code and message.
        const Status reason = fresh[i]->close_reason();
        const Status why = reason.code() == StatusCode::kUnauthenticated
                               ? reason
                               : Unavailable(fmt::format("no usable connection to {}: {}", peer_->address(),
                                                         reason.ToString()));
        for (auto& f : per_conn[i]) f.batch->FinishPart(f.index, why);
      }
    }
  }

 private:
  // The frame for bytes [done, done + length) of `op`.
  OutgoingFrame FrameOf(const ChannelOp& op, uint64_t done, uint64_t length,
                        const std::shared_ptr<BatchState>& batch) const {
    OutgoingFrame f;
    f.header.op = op.kind == OpKind::kWrite ? FrameOp::kWrite : op.from_tier ? FrameOp::kReadTier : FrameOp::kRead;
    f.header.segment_id = segment_id_;
    f.header.offset = op.offset + done;
    f.header.length = length;
    f.header.grant = op.grant;  // covers the whole op, so every chunk of it
    f.local = op.local + done;
    f.batch = batch;
    f.index = op.index;
    return f;
  }

  static void PlaceOnLeastLoaded(OutgoingFrame f, std::vector<uint64_t>& load,
                                 std::vector<std::vector<OutgoingFrame>>& per_conn) {
    const size_t target = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[target] += f.header.length + 1;
    per_conn[target].push_back(std::move(f));
  }

  const std::shared_ptr<TcpPeer> peer_;
  const uint64_t segment_id_;
  const uint64_t size_;
  const uint64_t chunk_bytes_;
};

}  // namespace

TcpTransport::TcpTransport(const TransferOptions& options) : options_(options) {
  int n = std::max(1, options.tcp_io_threads);
  for (int i = 0; i < n; ++i) {
    auto registry = std::make_shared<TcpConnection::Registry>();
    auto loop = std::make_unique<EventLoop>(
        fmt::format("tcp-io-{}", i), std::chrono::milliseconds(50), [registry] {
          auto now = std::chrono::steady_clock::now();
          // Copy: OnTick may close a connection, which edits the registry later, not now.
          for (const auto& c : *registry) c->OnTick(now);
        });
    loops_.push_back({std::move(loop), std::move(registry)});
  }
}

TcpTransport::~TcpTransport() {
  for (auto& l : loops_) l.loop->Stop();
  // The io threads are gone: closing from this thread is now safe.
  Status why = Unavailable("transfer engine shut down");
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [address, peer] : peers_) peer->CloseAll(why);
  for (auto& l : loops_) l.registry->clear();
}

Result<std::shared_ptr<SegmentChannel>> TcpTransport::Open(const SegmentEndpoint& endpoint) {
  if (endpoint.tcp_address.empty()) {
    return InvalidArgument(fmt::format("segment {} has no tcp address", endpoint.segment_id));
  }
  std::shared_ptr<TcpPeer> peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(endpoint.tcp_address);
    if (it != peers_.end()) peer = it->second;
  }
  if (!peer) {
    auto resolved = ResolveTcpAddress(endpoint.tcp_address);
    if (!resolved.ok()) return resolved.status();
    std::vector<EventLoop*> loops;
    std::vector<std::shared_ptr<TcpConnection::Registry>> registries;
    for (auto& l : loops_) {
      loops.push_back(l.loop.get());
      registries.push_back(l.registry);
    }
    TcpConnectionOptions copts;
    copts.connect_timeout = options_.connect_timeout;
    copts.stall_timeout = options_.tcp_stall_timeout;
    copts.send_buffer_bytes = options_.tcp_send_buffer_bytes;
    copts.receive_buffer_bytes = options_.tcp_receive_buffer_bytes;
    copts.secret = options_.secret;
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = peers_[endpoint.tcp_address];
    if (!slot) {
      slot = std::make_shared<TcpPeer>(endpoint.tcp_address, *resolved, std::move(loops),
                                       std::move(registries), options_.tcp_connections_per_peer, copts);
    }
    peer = slot;
  }
  uint64_t chunk = std::clamp<uint64_t>(options_.tcp_chunk_bytes, 4096, kMaxFramePayload);
  return std::shared_ptr<SegmentChannel>(
      std::make_shared<TcpChannel>(std::move(peer), endpoint.served_id(), endpoint.size, chunk));
}

}  // namespace kvpool::transfer
