// Reuse ceiling: the share of prompt blocks an unbounded, never-evicting prefix cache could
// serve. A replay's measured reuse can approach it but never beat it.
//
// Both definitions walk requests with a set of seen block ids. A request's hits are the
// leading run of its hash_ids already seen (a prefix cache serves a prefix, nothing after
// the first miss); then all its blocks become seen. Ceiling = sum(hits) / sum(blocks).
//   * AgentX: one walk per trace (block ids are local to a trace), over main and subagent
//     requests in time order; a corpus's ceiling pools hits and blocks over its traces.
//   * Mooncake: one walk over the whole file in file order (ids are global), 512-token blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "trace/block_ids.h"
#include "trace/trace.h"

namespace kvpool::trace {

struct ReuseCeiling {
  int64_t hit_blocks = 0;
  int64_t total_blocks = 0;

  double ratio() const { return total_blocks == 0 ? 0.0 : double(hit_blocks) / double(total_blocks); }
  ReuseCeiling& operator+=(const ReuseCeiling& other) {
    hit_blocks += other.hit_blocks;
    total_blocks += other.total_blocks;
    return *this;
  }
};

// The seen-set walk, one prompt at a time.
class PrefixHitWalk {
 public:
  // Returns the leading run of `ids` already seen, then marks all of `ids` seen.
  int64_t Visit(const BlockIds& ids);

  const ReuseCeiling& totals() const { return totals_; }

 private:
  std::unordered_set<uint64_t> seen_;
  // Prompts that share storage share a prefix (see block_ids.h). For each storage, how many
  // of its leading ids are known seen: a later prompt on it hits at least that many without
  // looking them up, which keeps a walk linear in *distinct* blocks, not in all blocks.
  // The entry holds the storage so its address is not reused by another buffer mid-walk.
  struct SeenPrefix {
    std::shared_ptr<const void> storage;
    size_t length = 0;
  };
  std::unordered_map<const void*, SeenPrefix> seen_prefix_;
  ReuseCeiling totals_;
};

// AgentX definition, one trace.
ReuseCeiling TraceReuseCeiling(const Trace& trace);
// Mooncake definition: one global walk over `requests` in the order given.
ReuseCeiling GlobalReuseCeiling(std::span<const Request> requests);
// The corpus's ceiling under its own format's definition.
ReuseCeiling CorpusReuseCeiling(const Corpus& corpus);

}  // namespace kvpool::trace
