// Sizes and HOST:PORT addresses as typed on command lines and in pool files.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/byte_size.h"
#include "common/host_port.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto parsed = kvpool::ParseByteSize(text); parsed.ok()) {
    // What was accepted prints back as a size that parses again (no silent overflow).
    if (!kvpool::ParseByteSize(std::to_string(*parsed)).ok()) std::abort();
  }
  (void)kvpool::CheckHostPort(text);
  return 0;
}
