// The handoff's control socket (handoff/handoff_control.h): a stream of messages from a peer
// that then closes. Every message is decoded or refused; a refused stream is closed.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "handoff/handoff_control.h"

using namespace kvpool::handoff;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;  // within the socket buffers: the write below cannot block
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  int buffer = 1 << 20;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  if (size > 0 && write(fds[0], data, size) != static_cast<ssize_t>(size)) std::abort();
  close(fds[0]);
  // Far deadline: with the peer closed, every read ends by the bytes, never by the clock.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int messages = 0; messages <= 64; ++messages) {
    auto m = ReceiveControl(fds[1], deadline);
    if (!m.ok()) break;
    if (m->text.size() > kMaxControlText) std::abort();
  }
  close(fds[1]);
  return 0;
}
