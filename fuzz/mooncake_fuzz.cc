// Mooncake FAST'25 trace files (JSONL of timestamped requests with block ids).
#include <cstdint>
#include <sstream>
#include <string>

#include "trace/mooncake_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  (void)kvpool::trace::ParseMooncake(in, "fuzz");
  return 0;
}
