// AgentX trace files (JSON records, one per line in .jsonl): one record, and the whole input
// as a file of records (trace/agentx_loader.h).
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "trace/agentx_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  int64_t dropped = 0;
  (void)kvpool::trace::ParseAgentXTrace(text, "fuzz", &dropped);
  std::istringstream in(text);
  (void)kvpool::trace::ParseAgentX(in, "fuzz");
  return 0;
}
