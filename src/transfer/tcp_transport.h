// TcpTransport: reaches segments through their store's SegmentServer over tcp.
//
// Per peer address it keeps `tcp_connections_per_peer` persistent connections spread over
// `tcp_io_threads` event loops. A request larger than `tcp_chunk_bytes` is cut into chunk
// frames, and each frame goes to the connection with the fewest bytes outstanding, so one
// large value streams over several connections at once. A connection that breaks fails its
// frames (UNAVAILABLE) and is replaced on the next request; no request waits on a dead peer
// past its batch's deadline.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transfer/event_loop.h"
#include "transfer/tcp_connection.h"
#include "transfer/transport.h"

namespace kvpool::transfer {

class TcpPeer;

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TransferOptions& options);
  // Stops the io threads, then fails whatever is still queued or in flight.
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  Result<std::shared_ptr<SegmentChannel>> Open(const SegmentEndpoint& endpoint) override;

 private:
  struct Loop {
    std::unique_ptr<EventLoop> loop;
    std::shared_ptr<TcpConnection::Registry> registry;  // touched by the loop thread only
  };

  TransferOptions options_;
  std::vector<Loop> loops_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<TcpPeer>> peers_;
};

}  // namespace kvpool::transfer
