// Small POSIX socket helpers shared by the tcp and shm paths: address parsing, socket
// options, and blocking-with-deadline I/O for the (rare) control exchanges.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/host_port.h"  // SplitHostPort
#include "common/status.h"
#include "transfer/unique_fd.h"

namespace kvpool::transfer {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Resolves "host:port" to one address (numeric hosts never touch DNS).
Result<SocketAddress> ResolveTcpAddress(std::string_view address);

// "ip:port" of a bound socket.
std::string FormatSocketAddress(const SocketAddress& address);

Status SetNonBlocking(int fd);

// TCP_NODELAY; SO_SNDBUF / SO_RCVBUF when the size is > 0 (0 leaves the kernel's autotuning).
void SetTcpDataOptions(int fd, int send_buffer_bytes, int receive_buffer_bytes);

// Waits until `fd` is ready for `events` (poll bits) or the deadline passes.
bool WaitReady(int fd, short events, std::chrono::steady_clock::time_point deadline);
// Exactly `size` bytes, by the deadline; false when the peer closed, failed or was too slow.
bool ReadExactly(int fd, uint8_t* out, size_t size, std::chrono::steady_clock::time_point deadline);
bool WriteExactly(int fd, const uint8_t* in, size_t size, std::chrono::steady_clock::time_point deadline);
// A non-blocking socket connected to "host:port" by the deadline (a control exchange's).
Result<UniqueFd> ConnectTcp(std::string_view address, std::chrono::steady_clock::time_point deadline);

// The name of the network interface that holds `ip` ("lo" for 127.0.0.1); NOT_FOUND when none
// does (an address of another host, or 0.0.0.0), INVALID_ARGUMENT when it is not an address.
Result<std::string> InterfaceWithAddress(std::string_view ip);

// Status from errno with a short context: "connect 10.0.0.1:80: Connection refused".
Status ErrnoStatus(StatusCode code, std::string_view context, int err);

}  // namespace kvpool::transfer
