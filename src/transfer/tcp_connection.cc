#include "transfer/tcp_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvpool::transfer {
namespace {

constexpr size_t kReadAheadBytes = 2 << 10;
constexpr size_t kMaxIov = 64;
constexpr size_t kDiscardBytes = 256 << 10;
// Payload received per recv while hashing it: still in L2 when the hash reads it.
constexpr uint64_t kHashedRecvBytes = 256 << 10;
constexpr int kMaxStepsPerEvent = 64;  // fairness between connections of one loop

// Stands in for the rest of a write payload whose batch was abandoned mid-frame: the frame
// must still be completed on the wire, and the target range is undefined after a failed put.
const char kZeros[64 << 10] = {};

char* DiscardBuffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kDiscardBytes]);
  return buffer.get();
}

uint64_t WireBytes(const OutgoingFrame& f) {
  return RequestHeader::kSize + (f.header.op == FrameOp::kWrite ? f.header.length : 0);
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

}  // namespace

TcpConnection::TcpConnection(EventLoop* loop, std::shared_ptr<Registry> registry, std::string peer,
                             SocketAddress address, TcpConnectionOptions options)
    : loop_(loop),
      registry_(std::move(registry)),
      peer_(std::move(peer)),
      address_(address),
      options_(options),
      rx_(kReadAheadBytes) {}

TcpConnection::~TcpConnection() {
  // Normally closed already; never leave a frame without a final status.
  Status why = Unavailable(fmt::format("connection to {} destroyed", peer_));
  for (auto& f : sending_) Fail(f, why);
  for (auto& f : awaiting_) Fail(f, why);
  for (auto& f : incoming_) Fail(f, why);
}

void TcpConnection::Start() {
  loop_->Post([self = shared_from_this()] { self->Connect(); });
}

bool TcpConnection::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

Status TcpConnection::close_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return close_reason_;
}

bool TcpConnection::Enqueue(std::vector<OutgoingFrame>& frames) {
  bool schedule = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    for (auto& f : frames) {
      f.header.request_id = next_request_id_++;
      outstanding_bytes_.fetch_add(f.header.length, std::memory_order_relaxed);
      incoming_.push_back(std::move(f));
    }
    schedule = !take_scheduled_;
    take_scheduled_ = true;
  }
  frames.clear();
  if (schedule) {
    loop_->Post([self = shared_from_this()] {
      self->TakeIncoming();
      self->SendSome();
    });
  }
  return true;
}

void TcpConnection::Connect() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
  }
  registry_->push_back(shared_from_this());
  connect_started_ = last_progress_ = std::chrono::steady_clock::now();
  fd_.Reset(::socket(address_.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd_.valid()) {
    Close(ErrnoStatus(StatusCode::kUnavailable, "socket", errno));
    return;
  }
  SetTcpDataOptions(fd_.get(), options_.send_buffer_bytes, options_.receive_buffer_bytes);
  if (::connect(fd_.get(), address_.get(), address_.length) == 0) {
    Connected();
  } else if (errno == EINPROGRESS) {
    connecting_ = true;
  } else {
    Close(ErrnoStatus(StatusCode::kUnavailable, fmt::format("connect {}", peer_), errno));
    return;
  }
  interest_ = EPOLLIN | EPOLLOUT;
  loop_->Add(fd_.get(), interest_, this);
  TakeIncoming();
  SendSome();
}

void TcpConnection::Connected() {
  connecting_ = false;
  awaiting_challenge_ = options_.secret.has_value();
  last_progress_ = std::chrono::steady_clock::now();
}

TcpConnection::Fill TcpConnection::FillRx(size_t n) {
  while (rx_len_ < n) {
    const ssize_t got = ::recv(fd_.get(), rx_.data() + rx_len_, n - rx_len_, 0);
    if (got > 0) {
      rx_len_ += static_cast<size_t>(got);
    } else if (got < 0 && WouldBlock(errno)) {
      return Fill::kWaiting;
    } else if (!(got < 0 && errno == EINTR)) {
      return Fill::kEnded;
    }
  }
  return Fill::kReady;
}

bool TcpConnection::ReceiveChallenge() {
  const Fill fill = FillRx(kChallengeSize);
  if (fill == Fill::kWaiting) return true;
  if (fill == Fill::kEnded) {
    Close(Unauthenticated(fmt::format("{} closed the connection instead of asking for the pool's secret", peer_)));
    return false;
  }
  SharedSecret::Challenge challenge;
  if (!DecodeChallenge(rx_.data(), &challenge).ok()) {
    Close(Unauthenticated(fmt::format("{} did not ask for the pool's secret (is it running without --auth-file?)", peer_)));
    return false;
  }
  rx_len_ = 0;
  proof_ = EncodeProof(*options_.secret, kTcpPurpose, challenge);
  proof_left_ = proof_.size();
  awaiting_challenge_ = false;
  awaiting_verdict_ = true;
  last_progress_ = std::chrono::steady_clock::now();
  return true;
}

bool TcpConnection::ReceiveVerdict() {
  const Fill fill = FillRx(ResponseHeader::kSize);
  if (fill == Fill::kWaiting) return true;
  if (fill == Fill::kEnded) {
    Close(Unauthenticated(fmt::format("{} closed the connection after this process's proof of the pool's secret",
                                      peer_)));
    return false;
  }
  ResponseHeader h;
  const Status decoded = DecodeResponseHeader(rx_.data(), &h);
  rx_len_ = 0;
  if (!decoded.ok() || h.request_id != 0 || h.length != 0) {
    Close(Unavailable(fmt::format("{} answered the proof of the pool's secret with something else", peer_)));
    return false;
  }
  if (h.status != StatusCode::kOk) {
    Close(Unauthenticated(fmt::format("{} refused this process's proof of the pool's secret (its --auth-file "
                                      "holds another secret)",
                                      peer_)));
    return false;
  }
  awaiting_verdict_ = false;
  last_progress_ = std::chrono::steady_clock::now();
  return true;
}

void TcpConnection::TakeIncoming() {
  std::vector<OutgoingFrame> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    take_scheduled_ = false;
    if (closed_) return;
    taken.swap(incoming_);
  }
  if (taken.empty()) return;
  if (sending_.empty() && awaiting_.empty()) last_progress_ = std::chrono::steady_clock::now();
  for (auto& f : taken) sending_.push_back(std::move(f));
}

void TcpConnection::SendSome() {
  if (!fd_.valid() || connecting_ || awaiting_challenge_) return;
  while (proof_left_ > 0) {
    const ssize_t n = ::send(fd_.get(), proof_.data() + proof_.size() - proof_left_, proof_left_, MSG_NOSIGNAL);
    if (n > 0) {
      proof_left_ -= static_cast<size_t>(n);
    } else if (n < 0 && WouldBlock(errno)) {
      UpdateInterest();
      return;
    } else if (!(n < 0 && errno == EINTR)) {
      Close(ErrnoStatus(StatusCode::kUnavailable, fmt::format("send to {}", peer_), errno));
      return;
    }
  }
  if (awaiting_verdict_) {
    UpdateInterest();
    return;
  }
  for (int step = 0; step < kMaxStepsPerEvent && !sending_.empty(); ++step) {
    // Frames whose batch was given up before any byte left are simply not sent.
    while (!sending_.empty() && front_sent_ == 0 && sending_.front().batch->buffers().closed()) {
      Fail(sending_.front(), Timeout("batch abandoned before the request was sent"));
      sending_.pop_front();
    }
    if (sending_.empty()) break;

    iovec iov[kMaxIov];
    uint8_t headers[kMaxIov][RequestHeader::kSize];
    size_t niov = 0;
    AccessGate* entered = nullptr;
    uint64_t skip = front_sent_;
    for (size_t i = 0; i < sending_.size() && niov + 2 <= kMaxIov; ++i) {
      OutgoingFrame& f = sending_[i];
      if (skip < RequestHeader::kSize) {
        EncodeRequestHeader(f.header, headers[i]);
        iov[niov++] = {headers[i] + skip, RequestHeader::kSize - skip};
        skip = 0;
      } else {
        skip -= RequestHeader::kSize;
      }
      if (f.header.op == FrameOp::kWrite && f.header.length > 0) {
        uint64_t done = skip;
        skip = 0;
        if (f.batch->buffers().Enter()) {
          entered = &f.batch->buffers();
          iov[niov++] = {f.local + done, f.header.length - done};
        } else {
          iov[niov++] = {const_cast<char*>(kZeros), std::min<uint64_t>(sizeof(kZeros), f.header.length - done)};
        }
        break;  // at most one payload, hence one open gate section, per sendmsg
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = niov;
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    int err = errno;
    if (entered != nullptr) entered->Exit();
    if (n < 0) {
      if (WouldBlock(err)) break;
      if (err == EINTR) continue;
      Close(ErrnoStatus(StatusCode::kUnavailable, fmt::format("send to {}", peer_), err));
      return;
    }
    last_progress_ = std::chrono::steady_clock::now();
    uint64_t left = static_cast<uint64_t>(n);
    while (left > 0) {
      OutgoingFrame& f = sending_.front();
      uint64_t take = std::min(left, WireBytes(f) - front_sent_);
      front_sent_ += take;
      left -= take;
      if (front_sent_ == WireBytes(f)) {
        awaiting_.push_back(std::move(f));
        sending_.pop_front();
        front_sent_ = 0;
      }
    }
  }
  UpdateInterest();
}

void TcpConnection::ReceiveSome() {
  // Request/response traffic puts the socket in delayed-ACK "pingpong" mode; when a large
  // read response then arrives with no request left to piggyback an ACK on, the server waits
  // ~40 ms delayed-ACK timeouts (measured: 1 MiB reads after small writes and an idle gap ran
  // at 0.6 instead of 4 GB/s). The kernel clears QUICKACK by itself, so re-arm it per event.
  int one = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
  if (awaiting_challenge_ && (!ReceiveChallenge() || awaiting_challenge_)) return;
  if (awaiting_verdict_ && (!ReceiveVerdict() || awaiting_verdict_)) return;
  for (int step = 0; step < kMaxStepsPerEvent && fd_.valid(); ++step) {
    ssize_t n;
    if (payload_left_ > 0) {
      OutgoingFrame& f = awaiting_.front();
      AccessSection section(f.batch->buffers());
      if (section.entered()) {
        char* at = f.local + (f.header.length - payload_left_);
        // A frame being hashed arrives in pieces small enough to hash while still in cache.
        n = ::recv(fd_.get(), at, f.hash ? std::min<uint64_t>(payload_left_, kHashedRecvBytes) : payload_left_, 0);
        if (n > 0 && f.hash) f.hash->Update(at, static_cast<size_t>(n));
      } else {
        n = ::recv(fd_.get(), DiscardBuffer(), std::min<uint64_t>(payload_left_, kDiscardBytes), 0);
      }
      if (n > 0) {
        payload_left_ -= static_cast<uint64_t>(n);
        last_progress_ = std::chrono::steady_clock::now();
        if (payload_left_ == 0) CompleteFront(std::move(front_status_));
        continue;
      }
    } else {
      n = ::recv(fd_.get(), rx_.data() + rx_len_, rx_.size() - rx_len_, 0);
      if (n > 0) {
        rx_len_ += static_cast<size_t>(n);
        last_progress_ = std::chrono::steady_clock::now();
        if (!ConsumeBufferedResponses()) return;
        continue;
      }
    }
    if (n == 0) {
      Close(Unavailable(fmt::format("{} closed the connection", peer_)));
      return;
    }
    if (WouldBlock(errno)) return;
    if (errno == EINTR) continue;
    Close(ErrnoStatus(StatusCode::kUnavailable, fmt::format("recv from {}", peer_), errno));
    return;
  }
}

bool TcpConnection::ConsumeBufferedResponses() {
  size_t pos = 0;
  while (payload_left_ == 0 && rx_len_ - pos >= ResponseHeader::kSize) {
    ResponseHeader h;
    Status decoded = DecodeResponseHeader(rx_.data() + pos, &h);
    if (!decoded.ok() && StartsLikeChallenge(rx_.data() + pos)) {
      Close(Unauthenticated(fmt::format("{} asks for the pool's secret: give this process the pool's --auth-file", peer_)));
      return false;
    }
    if (!decoded.ok()) {
      Close(Unavailable(fmt::format("malformed response from {}: {}", peer_, decoded.message())));
      return false;
    }
    if (awaiting_.empty() || h.request_id != awaiting_.front().header.request_id ||
        h.op != awaiting_.front().header.op) {
      Close(Unavailable(fmt::format("unexpected response {} from {}", h.request_id, peer_)));
      return false;
    }
    OutgoingFrame& f = awaiting_.front();
    pos += ResponseHeader::kSize;
    if (h.status == StatusCode::kOk && IsRead(f.header.op)) {
      if (h.length != f.header.length) {
        Close(Unavailable(fmt::format("response {} from {} carries {} bytes, asked {}", h.request_id,
                                      peer_, h.length, f.header.length)));
        return false;
      }
      uint64_t have = std::min<uint64_t>(h.length, rx_len_ - pos);
      {
        AccessSection section(f.batch->buffers());
        if (section.entered()) {
          std::memcpy(f.local, rx_.data() + pos, have);
          if (f.hash) f.hash->Update(f.local, have);
        }
      }
      pos += have;
      if (have < h.length) {
        payload_left_ = h.length - have;
        front_status_ = Status::Ok();
      } else {
        CompleteFront(Status::Ok());
      }
    } else {
      if (h.length != 0) {
        Close(Unavailable(fmt::format("response {} from {} has an unexpected payload", h.request_id, peer_)));
        return false;
      }
      CompleteFront(ResponseStatus(h, f));
    }
  }
  std::memmove(rx_.data(), rx_.data() + pos, rx_len_ - pos);
  rx_len_ -= pos;
  return true;
}

Status TcpConnection::ResponseStatus(const ResponseHeader& h, const OutgoingFrame& f) const {
  switch (h.status) {
    case StatusCode::kOk:
      return Status::Ok();
    case StatusCode::kStale:
      return Stale(fmt::format("segment {} is not served by {}", f.header.segment_id, peer_));
    case StatusCode::kInvalidArgument:
      return InvalidArgument(fmt::format("[{}, +{}) is outside segment {} at {}", f.header.offset,
                                         f.header.length, f.header.segment_id, peer_));
    default:
      return Status(h.status, fmt::format("{} refused request on segment {}", peer_, f.header.segment_id));
  }
}

void TcpConnection::CompleteFront(Status status) {
  OutgoingFrame f = std::move(awaiting_.front());
  awaiting_.pop_front();
  outstanding_bytes_.fetch_sub(f.header.length, std::memory_order_relaxed);
  if (status.ok() && f.checksum != nullptr) {
    AccessSection section(f.batch->buffers());  // the digest's slot lives as long as the buffers
    if (section.entered()) *f.checksum = f.hash->Digest();
  }
  f.batch->FinishPart(f.index, std::move(status));
}

void TcpConnection::Fail(OutgoingFrame& f, const Status& why) {
  outstanding_bytes_.fetch_sub(f.header.length, std::memory_order_relaxed);
  if (f.batch) f.batch->FinishPart(f.index, why);
  f.batch.reset();
}

void TcpConnection::UpdateInterest() {
  if (!fd_.valid()) return;
  uint32_t wanted = EPOLLIN | ((connecting_ || proof_left_ > 0 || !sending_.empty()) ? uint32_t{EPOLLOUT} : 0u);
  if (wanted != interest_) {
    interest_ = wanted;
    loop_->Modify(fd_.get(), interest_, this);
  }
}

void TcpConnection::OnEvents(uint32_t events) {
  auto self = shared_from_this();  // Close() may drop the registry's reference
  if (!fd_.valid()) return;
  if (connecting_) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      Close(ErrnoStatus(StatusCode::kUnavailable, fmt::format("connect {}", peer_), err != 0 ? err : ECONNREFUSED));
      return;
    }
    Connected();
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ReceiveSome();
  SendSome();
}

void TcpConnection::OnTick(std::chrono::steady_clock::time_point now) {
  if (!fd_.valid()) return;
  if (connecting_ && now - connect_started_ > options_.connect_timeout) {
    Close(Unavailable(fmt::format("connect to {} timed out after {} ms", peer_, options_.connect_timeout.count())));
  } else if ((awaiting_challenge_ || awaiting_verdict_) && now - connect_started_ > options_.connect_timeout) {
    Close(Unauthenticated(awaiting_challenge_ ? fmt::format("{} did not ask for the pool's secret within {} ms (is it "
                                                            "running without --auth-file?)",
                                                            peer_, options_.connect_timeout.count())
                                              : fmt::format("{} did not answer the proof of the pool's secret within "
                                                            "{} ms",
                                                            peer_, options_.connect_timeout.count())));
  } else if ((!sending_.empty() || !awaiting_.empty()) && now - last_progress_ > options_.stall_timeout) {
    Close(Unavailable(fmt::format("no bytes moved to or from {} for {} ms", peer_, options_.stall_timeout.count())));
  }
}

void TcpConnection::Close(const Status& why) {
  std::vector<OutgoingFrame> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    close_reason_ = why;
    queued.swap(incoming_);
  }
  spdlog::debug("tcp: closing connection to {}: {}", peer_, why.ToString());
  if (fd_.valid()) {
    loop_->Remove(fd_.get());
    fd_.Reset();
  }
  for (auto& f : sending_) Fail(f, why);
  for (auto& f : awaiting_) Fail(f, why);
  for (auto& f : queued) Fail(f, why);
  sending_.clear();
  awaiting_.clear();
  front_sent_ = payload_left_ = 0;
  rx_len_ = 0;
  // The registry's reference is dropped after the current event batch, never under our feet.
  loop_->Post([registry = registry_, self = shared_from_this()] {
    registry->erase(std::remove(registry->begin(), registry->end(), self), registry->end());
  });
}

}  // namespace kvpool::transfer
