// A storage service's shm socket: whatever a peer writes before closing its end is read as
// one request (transfer/shm_protocol.h). It must be refused or decoded, never hang.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "transfer/shm_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // within one socket buffer: the write below cannot block
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::abort();
  if (size > 0 && write(fds[0], data, size) != static_cast<ssize_t>(size)) std::abort();
  close(fds[0]);  // the peer is gone after its bytes: a short request must fail, not wait
  uint64_t segment_id = 0;
  (void)kvpool::transfer::ReadShmRequest(fds[1], &segment_id);
  close(fds[1]);
  return 0;
}
