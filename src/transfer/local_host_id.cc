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

}  // namespace

std::string LocalHostId() {
  if (const char* forced = std::getenv("KVPOOL_HOST_ID"); forced != nullptr && *forced != '\0') {
    return forced;
  }
  // Boot id and hostname cannot change while this process runs.
  static const std::string id = ReadBootId() + "/" + Hostname();
  return id;
}

}  // namespace kvpool::transfer
