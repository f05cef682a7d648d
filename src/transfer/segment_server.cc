#include "transfer/segment_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"

#include "transfer/access_gate.h"
#include "transfer/auth_handshake.h"
#include "transfer/event_loop.h"
#include "transfer/shm_protocol.h"
#include "transfer/socket_util.h"
#include "transfer/tcp_frame.h"
#include "transfer/tier_file_read.h"
#include "transfer/ucx_key.h"
#include "transfer/ucx_segments.h"
#include "transfer/unique_fd.h"

namespace kvpool::transfer {
namespace {

constexpr size_t kReadAheadBytes = 2 << 10;
constexpr size_t kDiscardBytes = 256 << 10;
constexpr int kMaxStepsPerEvent = 64;

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// One served segment. Io threads touch its memory only inside sections of `gate`, so once
// Retire() returns nobody reads or writes it again.
struct SegmentEntry {
  ServedSegment segment;
  UniqueFd memfd;    // our dup of the store's memfd; invalid => no shm for this segment
  UniqueFd flag_fd;  // the served-flag page handed to shm clients
  UniqueFd tier_fd;  // our dup of the store's SSD tier file; invalid => none
  void* flag_page = nullptr;
  std::unique_ptr<UcxRegistration> ucx;  // null => not served over UCX; read inside `gate`
  AccessGate gate;

  ~SegmentEntry() {
    if (flag_page != nullptr) ::munmap(flag_page, kShmFlagPageSize);
  }
  void Retire() {
    if (flag_page != nullptr) ShmFlagSet(flag_page, segment.segment_id, false);
    gate.Close();
    ucx.reset();  // with RDMA, remote access to the segment fails from here on
  }
  bool shm_capable() const { return memfd.valid() && flag_page != nullptr; }
};

class SegmentTable {
 public:
  std::shared_ptr<SegmentEntry> Find(uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : it->second;
  }
  // Returns the entry it replaced, if any.
  std::shared_ptr<SegmentEntry> Put(std::shared_ptr<SegmentEntry> entry) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[entry->segment.segment_id];
    std::swap(slot, entry);
    return entry;
  }
  std::shared_ptr<SegmentEntry> Remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    auto entry = std::move(it->second);
    entries_.erase(it);
    return entry;
  }
  std::vector<std::shared_ptr<SegmentEntry>> RemoveAll() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<SegmentEntry>> all;
    for (auto& [id, e] : entries_) all.push_back(std::move(e));
    entries_.clear();
    return all;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<SegmentEntry>> entries_;
};

class ServerConnection;
using ConnectionRegistry = std::vector<std::shared_ptr<ServerConnection>>;

// Serves one client connection: one request at a time, in order. Write payloads are received
// straight into segment memory and read payloads sent straight from it. With a secret, the
// connection first sends a challenge and reads the client's proof (auth_handshake.h); a wrong
// proof closes it before any request is read.
class ServerConnection final : public EventLoop::Handler,
                               public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(EventLoop* loop, std::shared_ptr<ConnectionRegistry> registry,
                   std::shared_ptr<SegmentTable> table, std::shared_ptr<const SharedSecret> secret, UniqueFd fd,
                   std::string peer)
      : loop_(loop),
        registry_(std::move(registry)),
        table_(std::move(table)),
        secret_(std::move(secret)),
        fd_(std::move(fd)),
        peer_(std::move(peer)),
        rx_(kReadAheadBytes) {}

  void Register() {
    registry_->push_back(shared_from_this());
    interest_ = EPOLLIN;
    if (secret_) {
      challenge_ = SharedSecret::NewChallenge();
      EncodeChallenge(challenge_, challenge_bytes_);
      phase_ = Phase::kChallenge;
      interest_ = EPOLLOUT;
    }
    loop_->Add(fd_.get(), interest_, this);
  }

  void OnEvents(uint32_t events) override {
    auto self = shared_from_this();
    Pump();
  }

 private:
  enum class Phase { kChallenge, kProof, kRefused, kHeader, kWritePayload, kDiscardPayload, kRespond };

  void Pump() {
    for (int step = 0; step < kMaxStepsPerEvent; ++step) {
      if (!fd_.valid()) return;
      bool progressed = false;
      switch (phase_) {
        case Phase::kChallenge: progressed = SendChallenge(); break;
        case Phase::kProof: progressed = ReadProof(); break;
        case Phase::kRefused: progressed = DrainRefused(); break;
        case Phase::kHeader: progressed = ReadHeader(); break;
        case Phase::kWritePayload:
        case Phase::kDiscardPayload: progressed = ReadPayload(); break;
        case Phase::kRespond: progressed = SendResponse(); break;
      }
      if (!progressed) return;
    }
    // Out of steps with work possibly buffered in rx_, which epoll cannot see: come back.
    loop_->Post([self = shared_from_this()] { self->Pump(); });
  }

  bool SendChallenge() {
    const ssize_t n = ::send(fd_.get(), challenge_bytes_ + challenge_sent_, kChallengeSize - challenge_sent_,
                             MSG_NOSIGNAL);
    if (n > 0) {
      challenge_sent_ += static_cast<size_t>(n);
      if (challenge_sent_ == kChallengeSize) {
        phase_ = Phase::kProof;
        SetInterest(EPOLLIN);
      }
      return true;
    }
    if (n < 0 && WouldBlock(errno)) return false;
    if (n < 0 && errno == EINTR) return true;
    Close();
    return false;
  }

  bool ReadProof() {
    // The fixed part says how long the whole proof (with a tenant's claim) is.
    Result<size_t> size = rx_len_ >= kProofSize ? ProofSize(rx_.data()) : Result<size_t>(kProofSize);
    if (rx_len_ >= kProofSize && (!size.ok() || rx_len_ >= *size)) {
      Result<std::optional<TenantClaim>> tenant =
          size.ok() ? CheckProof(*secret_, kTcpPurpose, challenge_, std::span<const uint8_t>(rx_.data(), *size))
                    : Result<std::optional<TenantClaim>>(size.status());
      if (!tenant.ok()) {
        spdlog::warn("segment server: refused {}: {}", peer_, tenant.status().message());
        // Says why (best effort: the verdict, UNAUTHENTICATED), then reads what the client
        // sent on until it closes: closing on unread bytes would reset the connection, and the
        // client would never read the challenge or the verdict that tell it why.
        ResponseHeader refusal;
        refusal.status = StatusCode::kUnauthenticated;
        EncodeResponseHeader(refusal, response_);
        (void)::send(fd_.get(), response_, ResponseHeader::kSize, MSG_NOSIGNAL | MSG_DONTWAIT);
        ::shutdown(fd_.get(), SHUT_WR);
        rx_len_ = 0;
        phase_ = Phase::kRefused;
        return true;
      }
      Consume(*size);
      tenant_ = std::move(tenant).value();
      request_ = RequestHeader{};  // the verdict answers request id 0
      StartResponse(StatusCode::kOk, 0);
      return true;
    }
    const ssize_t n = ::recv(fd_.get(), rx_.data() + rx_len_, rx_.size() - rx_len_, 0);
    if (n > 0) {
      rx_len_ += static_cast<size_t>(n);
      return true;
    }
    if (n == 0) {
      Close();  // a client without the secret gave up at the challenge
      return false;
    }
    return HandleRecvError();
  }

  bool DrainRefused() {
    const ssize_t n = ::recv(fd_.get(), DiscardBuffer(), kDiscardBytes, 0);
    if (n > 0) {
      payload_done_ += static_cast<uint64_t>(n);
      if (payload_done_ <= kMaxFramePayload) return true;
    } else if (n < 0) {
      return HandleRecvError();
    }
    Close();  // the client closed, or sent more than any frame may carry
    return false;
  }

  // Returns true when the caller should keep pumping.
  bool ReadHeader() {
    if (rx_len_ >= RequestHeader::kSize) {
      HandleHeader();
      return fd_.valid();
    }
    SetInterest(EPOLLIN);
    ssize_t n = ::recv(fd_.get(), rx_.data() + rx_len_, rx_.size() - rx_len_, 0);
    if (n > 0) {
      rx_len_ += static_cast<size_t>(n);
      return true;
    }
    if (n == 0) {
      if (rx_len_ > 0) spdlog::warn("segment server: {} closed mid-frame (truncated header)", peer_);
      Close();
      return false;
    }
    return HandleRecvError();
  }

  void HandleHeader() {
    RequestHeader h;
    Status decoded = DecodeRequestHeader(rx_.data(), &h);
    if (!decoded.ok()) {
      spdlog::warn("segment server: closing connection from {}: {}", peer_, decoded.message());
      Close();
      return;
    }
    Consume(RequestHeader::kSize);
    request_ = h;
    payload_done_ = 0;
    entry_ = table_->Find(h.segment_id);
    StatusCode code = StatusCode::kOk;
    const uint64_t bound = !entry_ ? 0 : h.op == FrameOp::kReadTier ? entry_->segment.tier_size : entry_->segment.size;
    if (!entry_) {
      code = StatusCode::kStale;
    } else if (h.op == FrameOp::kUcxKey) {
      code = UcxKeyReply();
    } else if (h.offset > bound || h.length > bound - h.offset) {
      code = StatusCode::kInvalidArgument;
    } else if (tenant_) {
      // A tenant reaches only what the master granted it (common/access_grant.h).
      const GrantOp op = h.op == FrameOp::kRead ? GrantOp::kRead
                         : h.op == FrameOp::kWrite ? GrantOp::kWrite
                                                   : GrantOp::kReadTier;
      const Status granted = CheckGrant(*secret_, h.grant, op, h.segment_id, h.offset, h.length, WallClockMs());
      if (!granted.ok()) {
        spdlog::warn("segment server: refused tenant '{}' at {}: {}", tenant_->name, peer_, granted.message());
        code = StatusCode::kPermissionDenied;
      }
    }
    if (h.op == FrameOp::kReadTier && code == StatusCode::kOk) code = ReadFromTier();
    if (h.op == FrameOp::kWrite && h.length > 0) {
      result_ = code;
      phase_ = code == StatusCode::kOk ? Phase::kWritePayload : Phase::kDiscardPayload;
    } else {
      StartResponse(code, IsRead(h.op) && code == StatusCode::kOk ? h.length : 0);
    }
  }

  // The segment's UCX key (ucx_key.h) into reply_buffer_. Not for tenants: a one-sided
  // access checks no grant.
  StatusCode UcxKeyReply() {
    if (request_.offset != 0 || request_.length != kUcxKeyBytes) return StatusCode::kInvalidArgument;
    if (tenant_) {
      spdlog::warn("segment server: refused UCX to tenant '{}' at {}: tenants use tcp, inside their grants",
                   tenant_->name, peer_);
      return StatusCode::kPermissionDenied;
    }
    AccessSection section(entry_->gate);
    if (!section.entered()) return StatusCode::kStale;
    if (!entry_->ucx) return StatusCode::kUnavailable;
    reply_buffer_.assign(entry_->ucx->key_reply().begin(), entry_->ucx->key_reply().end());
    return StatusCode::kOk;
  }

  // A tier read's bytes come from the file into this connection's buffer, then go out from
  // there like a segment's. The read blocks this io loop for one frame's disk read (at most
  // kMaxFramePayload; a client's frames are tcp_chunk_bytes unless it hashes them as they land).
  StatusCode ReadFromTier() {
    if (reply_buffer_.size() < request_.length) reply_buffer_.resize(request_.length);
    AccessSection section(entry_->gate);
    if (!section.entered()) return StatusCode::kStale;
    const Status read = ReadTierFile(entry_->tier_fd.get(), request_.offset, reply_buffer_.data(), request_.length,
                                     nullptr);
    if (!read.ok()) {
      spdlog::warn("segment server: tier read for {} failed: {}", peer_, read.message());
      return read.code();
    }
    return StatusCode::kOk;
  }

  bool ReadPayload() {
    uint64_t left = request_.length - payload_done_;
    char* segment_at = nullptr;
    if (phase_ == Phase::kWritePayload) {
      segment_at = static_cast<char*>(entry_->segment.base) + request_.offset + payload_done_;
    }
    ssize_t n;
    if (rx_len_ > 0) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(left, rx_len_));
      if (phase_ == Phase::kWritePayload) {
        AccessSection section(entry_->gate);
        if (!section.entered()) return SwitchToDiscard();
        std::memcpy(segment_at, rx_.data(), take);
      }
      Consume(take);
      n = static_cast<ssize_t>(take);
    } else if (phase_ == Phase::kWritePayload) {
      AccessSection section(entry_->gate);
      if (!section.entered()) return SwitchToDiscard();
      n = ::recv(fd_.get(), segment_at, left, 0);
    } else {
      n = ::recv(fd_.get(), DiscardBuffer(), std::min<uint64_t>(left, kDiscardBytes), 0);
    }
    if (n > 0) {
      payload_done_ += static_cast<uint64_t>(n);
      if (payload_done_ == request_.length) StartResponse(result_, 0);
      return true;
    }
    SetInterest(EPOLLIN);
    if (n == 0) {
      spdlog::warn("segment server: {} closed mid-frame ({} of {} payload bytes)", peer_,
                   payload_done_, request_.length);
      Close();
      return false;
    }
    return HandleRecvError();
  }

  bool SwitchToDiscard() {  // the segment was withdrawn under a write
    phase_ = Phase::kDiscardPayload;
    result_ = StatusCode::kStale;
    return true;
  }

  void StartResponse(StatusCode code, uint64_t payload) {
    ResponseHeader r;
    r.op = request_.op;
    r.status = code;
    r.request_id = request_.request_id;
    r.length = payload;
    EncodeResponseHeader(r, response_);
    response_payload_ = payload;
    response_sent_ = 0;
    phase_ = Phase::kRespond;
  }

  bool SendResponse() {
    uint64_t total = ResponseHeader::kSize + response_payload_;
    if (response_sent_ == total) {
      entry_.reset();
      phase_ = Phase::kHeader;
      return true;
    }
    iovec iov[2];
    int niov = 0;
    if (response_sent_ < ResponseHeader::kSize) {
      iov[niov++] = {response_ + response_sent_, ResponseHeader::kSize - response_sent_};
    }
    bool entered = false;
    if (response_payload_ > 0 && request_.op != FrameOp::kRead) {  // tier read or UCX key: our buffer
      const uint64_t done = response_sent_ > ResponseHeader::kSize ? response_sent_ - ResponseHeader::kSize : 0;
      iov[niov++] = {reply_buffer_.data() + done, response_payload_ - done};
    } else if (response_payload_ > 0) {
      entered = entry_->gate.Enter();
      if (!entered) {
        if (response_sent_ == 0) {  // nothing promised yet: answer STALE instead
          StartResponse(StatusCode::kStale, 0);
          return true;
        }
        spdlog::warn("segment server: segment {} withdrawn mid-response to {}; closing",
                     request_.segment_id, peer_);
        Close();
        return false;
      }
      uint64_t done = response_sent_ > ResponseHeader::kSize ? response_sent_ - ResponseHeader::kSize : 0;
      iov[niov++] = {static_cast<char*>(entry_->segment.base) + request_.offset + done,
                     response_payload_ - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = niov;
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    int err = errno;
    if (entered) entry_->gate.Exit();
    if (n > 0) {
      response_sent_ += static_cast<uint64_t>(n);
      return true;
    }
    if (n < 0 && WouldBlock(err)) {
      SetInterest(EPOLLOUT);
      return false;
    }
    if (n < 0 && err == EINTR) return true;
    spdlog::debug("segment server: send to {} failed: {}", peer_, std::strerror(err));
    Close();
    return false;
  }

  bool HandleRecvError() {
    if (WouldBlock(errno)) return false;
    if (errno == EINTR) return true;
    spdlog::debug("segment server: recv from {} failed: {}", peer_, std::strerror(errno));
    Close();
    return false;
  }

  void Consume(size_t n) {
    std::memmove(rx_.data(), rx_.data() + n, rx_len_ - n);
    rx_len_ -= n;
  }

  void SetInterest(uint32_t events) {
    if (fd_.valid() && events != interest_) {
      interest_ = events;
      loop_->Modify(fd_.get(), interest_, this);
    }
  }

  void Close() {
    if (!fd_.valid()) return;
    loop_->Remove(fd_.get());
    fd_.Reset();
    entry_.reset();
    loop_->Post([registry = registry_, self = shared_from_this()] {
      registry->erase(std::remove(registry->begin(), registry->end(), self), registry->end());
    });
  }

  static char* DiscardBuffer() {
    thread_local std::unique_ptr<char[]> buffer(new char[kDiscardBytes]);
    return buffer.get();
  }

  EventLoop* const loop_;
  const std::shared_ptr<ConnectionRegistry> registry_;
  const std::shared_ptr<SegmentTable> table_;
  const std::shared_ptr<const SharedSecret> secret_;  // null: no proof asked
  UniqueFd fd_;
  const std::string peer_;
  SharedSecret::Challenge challenge_{};
  std::optional<TenantClaim> tenant_;  // the tenant it proved; none for the pool's secret
  uint8_t challenge_bytes_[kChallengeSize] = {};
  size_t challenge_sent_ = 0;
  uint32_t interest_ = 0;
  std::vector<uint8_t> rx_;
  size_t rx_len_ = 0;
  Phase phase_ = Phase::kHeader;
  RequestHeader request_;
  std::shared_ptr<SegmentEntry> entry_;  // of the request in progress
  StatusCode result_ = StatusCode::kOk;
  uint64_t payload_done_ = 0;
  uint8_t response_[ResponseHeader::kSize] = {};
  uint64_t response_payload_ = 0;
  uint64_t response_sent_ = 0;
  // What a tier read or UCX key request is answered from (grown to the largest asked).
  std::vector<char> reply_buffer_;
};

struct ServerLoop {
  std::unique_ptr<EventLoop> loop;
  std::shared_ptr<ConnectionRegistry> registry;
};

// Accepts tcp connections on loop 0 and deals them out to the loops round-robin.
class Acceptor final : public EventLoop::Handler {
 public:
  Acceptor(UniqueFd listener, std::vector<ServerLoop>* loops, std::shared_ptr<SegmentTable> table,
           std::shared_ptr<const SharedSecret> secret, int send_buffer_bytes, int receive_buffer_bytes)
      : listener_(std::move(listener)),
        loops_(loops),
        table_(std::move(table)),
        secret_(std::move(secret)),
        send_buffer_bytes_(send_buffer_bytes),
        receive_buffer_bytes_(receive_buffer_bytes) {}

  int fd() const { return listener_.get(); }

  void OnEvents(uint32_t events) override {
    while (true) {
      SocketAddress from;
      from.length = sizeof(from.storage);
      int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from.storage), &from.length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (!WouldBlock(errno)) spdlog::warn("segment server: accept: {}", std::strerror(errno));
        return;
      }
      SetTcpDataOptions(fd, send_buffer_bytes_, receive_buffer_bytes_);
      ServerLoop& target = (*loops_)[next_++ % loops_->size()];
      auto owned = std::make_shared<UniqueFd>(fd);
      target.loop->Post([owned, &target, table = table_, secret = secret_, peer = FormatSocketAddress(from)] {
        auto conn = std::make_shared<ServerConnection>(target.loop.get(), target.registry, table, secret,
                                                       std::move(*owned), peer);
        conn->Register();
      });
    }
  }

 private:
  UniqueFd listener_;
  std::vector<ServerLoop>* loops_;
  std::shared_ptr<SegmentTable> table_;
  const std::shared_ptr<const SharedSecret> secret_;
  const int send_buffer_bytes_;
  const int receive_buffer_bytes_;
  size_t next_ = 0;
};

class SegmentServerImpl final : public SegmentServer {
 public:
  explicit SegmentServerImpl(const SegmentServerOptions& options)
      : options_(options),
        table_(std::make_shared<SegmentTable>()),
        secret_(options.secret ? std::make_shared<const SharedSecret>(*options.secret) : nullptr) {}
  ~SegmentServerImpl() override { Stop(); }

  Status Init() {
    if (options_.ucx.enabled) {
      UcxSettings settings = options_.ucx;
      // Unless told, UCX serves on the interface of the tcp listen address only: left to
      // itself it would offer every NIC, and clients would reach a store of one rail over
      // another (a cut of that other rail would then reach this store's part too).
      std::string host;
      uint16_t port = 0;
      if (settings.devices.empty() && SplitHostPort(options_.tcp_listen, &host, &port).ok()) {
        if (auto device = InterfaceWithAddress(host); device.ok()) settings.devices = *device;
      }
      auto ucx = UcxSegments::Start(settings);
      if (!ucx.ok()) return ucx.status();
      ucx_ = std::move(ucx.value());
      spdlog::info("segment server: serving UCX on {}: {}", settings.devices.empty() ? "every device" : settings.devices,
                   ucx_->Describe());
    }
    KVPOOL_RETURN_IF_ERROR(StartTcp());
    if (!options_.shm_socket_path.empty()) KVPOOL_RETURN_IF_ERROR(StartShm());
    return Status::Ok();
  }

  std::string tcp_address() const override { return tcp_address_; }
  std::string shm_socket_path() const override { return options_.shm_socket_path; }
  std::string ucx_description() const override { return ucx_ ? ucx_->Describe() : ""; }

  void Serve(const ServedSegment& segment) override {
    auto entry = std::make_shared<SegmentEntry>();
    entry->segment = segment;
    if (segment.tier_fd >= 0) {
      entry->tier_fd.Reset(::fcntl(segment.tier_fd, F_DUPFD_CLOEXEC, 0));
      if (!entry->tier_fd.valid()) spdlog::warn("segment server: segment {} served without its SSD tier: {}",
                                                segment.segment_id, std::strerror(errno));
    }
    if (!entry->tier_fd.valid()) entry->segment.tier_size = 0;
    if (segment.memfd >= 0 && !options_.shm_socket_path.empty()) PrepareShm(*entry);
    if (ucx_) {
      auto registered = ucx_->Register(segment.base, segment.size);
      if (registered.ok()) {
        entry->ucx = std::move(registered.value());
      } else {
        spdlog::warn("segment server: segment {} served without UCX: {}", segment.segment_id,
                     registered.status().message());
      }
    }
    if (auto replaced = table_->Put(entry)) replaced->Retire();
  }

  void Withdraw(uint64_t segment_id) override {
    if (auto entry = table_->Remove(segment_id)) entry->Retire();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    for (auto& l : loops_) l.loop->Stop();
    for (auto& l : loops_) l.registry->clear();  // closes every connection's socket
    acceptor_.reset();
    if (shm_thread_.joinable()) {
      uint64_t one = 1;
      ssize_t ignored = ::write(shm_wake_.get(), &one, sizeof(one));
      (void)ignored;
      shm_thread_.join();
      shm_listener_.Reset();
      ::unlink(options_.shm_socket_path.c_str());
    }
    for (auto& entry : table_->RemoveAll()) entry->Retire();
  }

 private:
  Status StartTcp() {
    auto address = ResolveTcpAddress(options_.tcp_listen);
    if (!address.ok()) return address.status();
    UniqueFd fd(::socket(address->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return ErrnoStatus(StatusCode::kInternal, "socket", errno);
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), address->get(), address->length) != 0) {
      return ErrnoStatus(StatusCode::kUnavailable, fmt::format("bind {}", options_.tcp_listen), errno);
    }
    if (::listen(fd.get(), 1024) != 0) return ErrnoStatus(StatusCode::kInternal, "listen", errno);
    SocketAddress bound;
    bound.length = sizeof(bound.storage);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound.storage), &bound.length);
    tcp_address_ = FormatSocketAddress(bound);

    int n = std::max(1, options_.io_threads);
    for (int i = 0; i < n; ++i) {
      loops_.push_back({std::make_unique<EventLoop>(fmt::format("segment-io-{}", i),
                                                    std::chrono::milliseconds(100), nullptr),
                        std::make_shared<ConnectionRegistry>()});
    }
    acceptor_ = std::make_unique<Acceptor>(std::move(fd), &loops_, table_, secret_, options_.send_buffer_bytes,
                                           options_.receive_buffer_bytes);
    Acceptor* acceptor = acceptor_.get();
    EventLoop* first = loops_[0].loop.get();
    first->Post([first, acceptor] { first->Add(acceptor->fd(), EPOLLIN, acceptor); });
    return Status::Ok();
  }

  Status StartShm() {
    const std::string& path = options_.shm_socket_path;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) {
      return InvalidArgument(fmt::format("shm socket path '{}' is too long", path));
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    shm_listener_.Reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!shm_listener_.valid()) return ErrnoStatus(StatusCode::kInternal, "socket(AF_UNIX)", errno);
    ::unlink(path.c_str());  // a socket file left by a previous, killed store
    if (::bind(shm_listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return ErrnoStatus(StatusCode::kUnavailable, fmt::format("bind {}", path), errno);
    }
    if (::listen(shm_listener_.get(), 128) != 0) return ErrnoStatus(StatusCode::kInternal, "listen", errno);
    shm_wake_.Reset(::eventfd(0, EFD_CLOEXEC));
    shm_thread_ = std::thread([this] { ServeShm(); });
    return Status::Ok();
  }

  // Hands out memfds, one short exchange per client connection (control path only).
  void ServeShm() {
    while (true) {
      pollfd fds[2] = {{shm_listener_.get(), POLLIN, 0}, {shm_wake_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents) return;
      if (!(fds[0].revents & POLLIN)) continue;
      UniqueFd conn(::accept4(shm_listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) continue;
      timeval tv{1, 0};  // a silent client must not hold this thread
      ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (secret_) {
        Status admitted = AdmitShmPeer(conn.get());
        if (!admitted.ok()) {
          spdlog::warn("segment server: shm socket {}: refused a client: {}", options_.shm_socket_path,
                       admitted.message());
          (void)SendShmReply(conn.get(), StatusCode::kUnauthenticated, 0, 0, -1, -1);
          continue;
        }
      }
      uint64_t segment_id = 0;
      Status request = ReadShmRequest(conn.get(), &segment_id);
      if (!request.ok()) {
        spdlog::warn("segment server: shm socket {}: {}", options_.shm_socket_path, request.message());
        continue;
      }
      auto entry = table_->Find(segment_id);
      Status sent;
      if (entry && entry->shm_capable() && !entry->gate.closed()) {
        sent = SendShmReply(conn.get(), StatusCode::kOk, segment_id, entry->segment.size, entry->memfd.get(),
                            entry->flag_fd.get(), entry->tier_fd.get(), entry->segment.tier_size);
      } else {
        sent = SendShmReply(conn.get(), StatusCode::kStale, segment_id, 0, -1, -1);
      }
      if (!sent.ok()) spdlog::debug("segment server: shm reply: {}", sent.message());
    }
  }

  // A same-host client gets the segment's memory itself: it must run as this process's user
  // (or root), and prove the pool's secret.
  Status AdmitShmPeer(int fd) {
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
      return ErrnoStatus(StatusCode::kUnauthenticated, "SO_PEERCRED", errno);
    }
    if (peer.uid != ::getuid() && peer.uid != 0) {
      return Unauthenticated(fmt::format("process {} runs as uid {}, this store as uid {}", peer.pid, peer.uid, ::getuid()));
    }
    return DemandProof(fd, *secret_, kShmPurpose, fmt::format("process {}", peer.pid),
                       std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }

  // Gives the entry its own memfd reference and a served-flag page. On failure the segment
  // is still served over tcp, just not over shm.
  void PrepareShm(SegmentEntry& entry) {
    const uint64_t id = entry.segment.segment_id;
    entry.memfd.Reset(::fcntl(entry.segment.memfd, F_DUPFD_CLOEXEC, 0));
    // Best effort: a sealed memfd cannot shrink under a client's mapping (SIGBUS there).
    if (::fcntl(entry.memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      spdlog::debug("segment server: segment {} memfd not sealable: {}", id, std::strerror(errno));
    }
    entry.flag_fd.Reset(::memfd_create("kvpool-served-flag", MFD_CLOEXEC));
    void* page = MAP_FAILED;
    if (entry.flag_fd.valid() && ::ftruncate(entry.flag_fd.get(), kShmFlagPageSize) == 0) {
      page = ::mmap(nullptr, kShmFlagPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, entry.flag_fd.get(), 0);
    }
    if (!entry.memfd.valid() || page == MAP_FAILED) {
      spdlog::warn("segment server: segment {} served without shm: {}", id, std::strerror(errno));
      entry.memfd.Reset();
      return;
    }
    entry.flag_page = page;
    ShmFlagSet(page, id, true);
  }

  const SegmentServerOptions options_;
  // Before the table: registrations (held by entries) are dropped in Stop(), before it goes.
  std::unique_ptr<UcxSegments> ucx_;
  const std::shared_ptr<SegmentTable> table_;
  const std::shared_ptr<const SharedSecret> secret_;  // null: no proof asked
  std::atomic<bool> stopped_{false};
  std::string tcp_address_;
  std::vector<ServerLoop> loops_;
  std::unique_ptr<Acceptor> acceptor_;
  UniqueFd shm_listener_;
  UniqueFd shm_wake_;
  std::thread shm_thread_;
};

}  // namespace

Result<std::unique_ptr<SegmentServer>> SegmentServer::Start(const SegmentServerOptions& options) {
  auto server = std::make_unique<SegmentServerImpl>(options);
  Status started = server->Init();
  if (!started.ok()) return started;
  return std::unique_ptr<SegmentServer>(std::move(server));
}

}  // namespace kvpool::transfer
