// transfer_test_server: one SegmentServer in its own process, for tests that kill or stop a
// server mid-transfer. Serves one tcp-only segment filled with PatternByte(seed, i) (and over
// UCX's tcp on loopback when the fifth argument is "ucx"), prints "READY <host:port>" on
// stdout, then serves until killed.
//
//   transfer_test_server <port> <segment_id> <size_bytes> <seed> [ucx]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "transfer/segment_server.h"
#include "transfer/memfd_region.h"

int main(int argc, char** argv) {
  using namespace kvpool::transfer;
  if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "ucx")) {
    std::fprintf(stderr, "usage: %s <port> <segment_id> <size_bytes> <seed> [ucx]\n", argv[0]);
    return 2;
  }
  uint64_t segment_id = std::strtoull(argv[2], nullptr, 10);
  uint64_t size = std::strtoull(argv[3], nullptr, 10);
  uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  auto region = MemfdRegion::Create(size);
  if (!region.ok()) {
    std::fprintf(stderr, "%s\n", region.status().ToString().c_str());
    return 1;
  }
  FillPattern((*region)->data(), 0, size, seed);
  SegmentServerOptions options;
  options.tcp_listen = std::string("127.0.0.1:") + argv[1];
  if (argc == 6) options.ucx = {true, "tcp", "lo"};
  auto server = SegmentServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  (*server)->Serve({segment_id, (*region)->data(), size, -1});
  std::printf("READY %s\n", (*server)->tcp_address().c_str());
  std::fflush(stdout);
  while (true) ::pause();
}
