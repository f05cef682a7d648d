// Writes traces in the AgentX JSONL format that agentx_loader.h reads: one trace per line,
// subagent entries placed right after the parent turn that spawns them. Keys come in the
// order the format lists them, numbers in their shortest exact form, so loading what was
// written gives back an identical Trace and writing is deterministic byte for byte.
#pragma once

#include <ostream>
#include <string>

#include "common/status.h"
#include "trace/trace.h"

namespace kvpool::trace {

// One line, without the trailing newline.
std::string AgentXTraceLine(const Trace& trace);

// REQUIRES: corpus.format is kAgentX.
Status WriteAgentX(const Corpus& corpus, std::ostream& out);
Status WriteAgentXFile(const Corpus& corpus, const std::string& path);

}  // namespace kvpool::trace
