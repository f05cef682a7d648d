// LocalHostId(): see transfer_engine.h.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "transfer/transfer_engine.h"

namespace kvpool::transfer {
namespace {

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? "no-boot-id" : id;
}

std::string Hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "no-hostname";
  return name;
}

// "net:[4026531840]": processes in different network namespaces are different hosts to
// kvpool — scripts/cluster.sh runs each emulated server in its own namespace, and its
// clients must reach other servers' stores over the network, not through shared memory.
std::string NetworkNamespace() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof(link) - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : "no-netns";
}

}  // namespace

std::string LocalHostId() {
  if (const char* forced = std::getenv("KVPOOL_HOST_ID"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  // Boot id, hostname and network namespace do not change while this process runs.
  static const std::string id = ReadBootId() + "/" + Hostname() + "/" + NetworkNamespace();
  return id;
}

}  // namespace kvpool::transfer
