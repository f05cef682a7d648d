// TcpConnection: the client end of one persistent tcp connection to a segment server.
//
// Submitting threads Enqueue frames; the connection's EventLoop thread sends them (header
// and payload in one sendmsg, payload straight from the caller's buffer) and matches the
// in-order responses, receiving read payloads straight into the caller's buffer. A broken,
// refused, timed-out or stalled connection fails every frame it holds with UNAVAILABLE and
// closes for good; the pool (TcpTransport) opens a replacement on the next request.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "transfer/batch_state.h"
#include "transfer/event_loop.h"
#include "transfer/auth_handshake.h"
#include "transfer/socket_util.h"
#include "transfer/tcp_frame.h"
#include "transfer/transfer_engine.h"

namespace kvpool::transfer {

// One request frame and where its bytes come from or go to.
struct OutgoingFrame {
  RequestHeader header;  // request_id is assigned by Enqueue
  char* local = nullptr;
  std::shared_ptr<BatchState> batch;
  size_t index = 0;
  // A read to hash as its payload arrives (a whole op's, so one frame): the stream, and where
  // its digest goes once the frame completes OK (ChannelOp::checksum).
  std::unique_ptr<ChecksumStream> hash;
  uint64_t* checksum = nullptr;
};

struct TcpConnectionOptions {
  // Bounds the connect and, with a secret, the server's challenge (auth_handshake.h).
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds stall_timeout{5000};
  int send_buffer_bytes = 0;
  int receive_buffer_bytes = 0;
  // The pool's secret: the connection proves it before its first frame, and accepts no
  // server that does not ask.
  std::optional<SharedSecret> secret;
};

class TcpConnection final : public EventLoop::Handler,
                            public std::enable_shared_from_this<TcpConnection> {
 public:
  // Frames bound for the loop's connections live in `registry` (loop thread only) while open.
  using Registry = std::vector<std::shared_ptr<TcpConnection>>;

  TcpConnection(EventLoop* loop, std::shared_ptr<Registry> registry, std::string peer,
                SocketAddress address, TcpConnectionOptions options);
  ~TcpConnection() override;

  // Any thread: starts connecting (on the loop thread).
  void Start();
  // Any thread: queues frames in order. Returns false, taking nothing, once closed.
  bool Enqueue(std::vector<OutgoingFrame>& frames);
  bool closed() const;
  // Why it closed (OK while open): a peer that refused our secret says so here, and the next
  // request is answered with that, not a bare "no connection".
  Status close_reason() const;
  // Payload bytes queued or in flight; the pool sends new work to the least loaded.
  uint64_t outstanding_bytes() const { return outstanding_bytes_.load(std::memory_order_relaxed); }

  // Loop thread only.
  void OnEvents(uint32_t events) override;
  void OnTick(std::chrono::steady_clock::time_point now);
  // Loop thread, or any thread once the loop has stopped. Idempotent.
  void Close(const Status& why);

 private:
  void Connect();
  // The socket is connected: frames may go, or first the challenge is awaited.
  void Connected();
  // Read the server's challenge (and prepare the proof), then its verdict on the proof. False
  // once closed.
  bool ReceiveChallenge();
  bool ReceiveVerdict();
  // Reads into rx_ until it holds `n` bytes: kWaiting when the socket has nothing more now,
  // kEnded when the peer closed or the read failed.
  enum class Fill { kReady, kWaiting, kEnded };
  Fill FillRx(size_t n);
  void TakeIncoming();
  void SendSome();
  void ReceiveSome();
  bool ConsumeBufferedResponses();
  void CompleteFront(Status status);
  void UpdateInterest();
  void Fail(OutgoingFrame& frame, const Status& why);
  Status ResponseStatus(const ResponseHeader& header, const OutgoingFrame& frame) const;

  EventLoop* const loop_;
  const std::shared_ptr<Registry> registry_;
  const std::string peer_;
  const SocketAddress address_;
  const TcpConnectionOptions options_;
  std::atomic<uint64_t> outstanding_bytes_{0};

  mutable std::mutex mu_;  // guards the fields up to the blank line
  bool closed_ = false;
  Status close_reason_;
  bool take_scheduled_ = false;
  uint64_t next_request_id_ = 1;
  std::vector<OutgoingFrame> incoming_;

  // Loop thread only.
  UniqueFd fd_;
  bool connecting_ = false;
  bool awaiting_challenge_ = false;     // connected, the server's challenge not read yet
  bool awaiting_verdict_ = false;       // proof sent (or being sent), the server's answer not read yet
  std::vector<uint8_t> proof_;         // sent before the first frame
  size_t proof_left_ = 0;               // bytes of proof_ not sent yet (its tail)
  uint32_t interest_ = 0;
  std::chrono::steady_clock::time_point connect_started_;
  std::chrono::steady_clock::time_point last_progress_;
  std::deque<OutgoingFrame> sending_;   // front may be partly sent
  uint64_t front_sent_ = 0;             // bytes of sending_.front() already sent
  std::deque<OutgoingFrame> awaiting_;  // fully sent, response pending, in request order
  std::vector<uint8_t> rx_;             // read-ahead for response headers
  size_t rx_len_ = 0;
  uint64_t payload_left_ = 0;           // of awaiting_.front()'s read payload
  Status front_status_;                 // outcome of awaiting_.front() once its payload is in
};

}  // namespace kvpool::transfer
