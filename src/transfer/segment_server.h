// SegmentServer: the storage side of the transfer engine. Serves reads and writes of the
// segments it is given, over tcp (for other hosts) and over a unix socket that hands out each
// segment's memfd (for clients on this host, which then copy without any socket on the path),
// and reads of its store's SSD tier file the same two ways.
//
// Every request names a segment id; requests for ids not currently served fail with STALE,
// requests outside a segment's bounds with INVALID_ARGUMENT. Malformed or truncated frames
// close that one connection and are logged; the server keeps serving everyone else.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/shared_secret.h"
#include "common/status.h"
#include "transfer/transfer_engine.h"  // UcxSettings

namespace kvpool::transfer {

struct ServedSegment {
  uint64_t segment_id = 0;
  void* base = nullptr;  // REQUIRES: [base, base+size) stays mapped while served
  uint64_t size = 0;
  int memfd = -1;        // handed to same-host clients; -1 => no shm for this segment
  // The store's SSD tier file (ssd/tier_file.h), read by tier reads (TransferRequest::from_tier):
  // same-host clients get it with the memfd and read it themselves, tcp clients' reads are
  // read from it here. -1 => none. The server keeps its own reference.
  int tier_fd = -1;
  uint64_t tier_size = 0;  // bytes of it that may be read
};

struct SegmentServerOptions {
  std::string tcp_listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string shm_socket_path;             // empty => no shm server
  int io_threads = 2;
  // SO_SNDBUF / SO_RCVBUF of accepted sockets; 0 leaves the kernel's autotuning.
  int send_buffer_bytes = 0;
  int receive_buffer_bytes = 0;
  // The pool's secret (--auth-file): every tcp and shm connection must prove it before its
  // first request (auth_handshake.h), and a same-host client must run as this process's user
  // (or root). None: anyone who reaches the sockets is served.
  std::optional<SharedSecret> secret;
  // Also serve the segments over UCX, one-sided (ucx_segments.h): Start fails, saying why,
  // when UCX cannot start. Tenants are refused it (no grant is checked on a one-sided access).
  // Without ucx.devices, UCX serves on the interface that holds tcp_listen's address (all of
  // them for 0.0.0.0 or a name).
  UcxSettings ucx;
};

class SegmentServer {
 public:
  static Result<std::unique_ptr<SegmentServer>> Start(const SegmentServerOptions& options);
  virtual ~SegmentServer() = default;

  // "host:port" actually bound (the port filled in when 0 was asked).
  virtual std::string tcp_address() const = 0;
  virtual std::string shm_socket_path() const = 0;
  // "ucx (UCX 1.13.1, no CUDA memory)" when it serves UCX, else "".
  virtual std::string ucx_description() const = 0;

  // Starts serving a segment (or replaces the one with the same id).
  virtual void Serve(const ServedSegment& segment) = 0;
  // Stops serving a segment id; later requests naming it fail with STALE.
  virtual void Withdraw(uint64_t segment_id) = 0;
  // Closes listeners and connections; in-flight requests fail. Idempotent; the destructor calls it.
  virtual void Stop() = 0;
};

}  // namespace kvpool::transfer
