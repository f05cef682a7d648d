#include "trace/reuse_ceiling.h"

#include <algorithm>

namespace kvpool::trace {

int64_t PrefixHitWalk::Visit(const BlockIds& ids) {
  const std::span<const uint64_t> view = ids.view();
  std::shared_ptr<const void> storage = ids.storage();
  SeenPrefix& entry = seen_prefix_[storage.get()];
  if (!entry.storage) entry.storage = std::move(storage);
  size_t& known = entry.length;
  size_t hits = std::min(known, view.size());
  while (hits < view.size() && seen_.contains(view[hits])) ++hits;
  for (size_t i = std::min(known, view.size()); i < view.size(); ++i) seen_.insert(view[i]);
  known = std::max(known, view.size());
  totals_.hit_blocks += static_cast<int64_t>(hits);
  totals_.total_blocks += static_cast<int64_t>(view.size());
  return static_cast<int64_t>(hits);
}

ReuseCeiling TraceReuseCeiling(const Trace& trace) {
  PrefixHitWalk walk;
  for (const Request* r : trace.RequestsInTimeOrder()) walk.Visit(r->hash_ids);
  return walk.totals();
}

ReuseCeiling GlobalReuseCeiling(std::span<const Request> requests) {
  PrefixHitWalk walk;
  for (const Request& r : requests) walk.Visit(r.hash_ids);
  return walk.totals();
}

ReuseCeiling CorpusReuseCeiling(const Corpus& corpus) {
  ReuseCeiling total;
  if (corpus.format == TraceFormat::kMooncake) {
    PrefixHitWalk walk;
    for (const Trace& t : corpus.traces)
      for (const Request& r : t.requests) walk.Visit(r.hash_ids);
    return walk.totals();
  }
  for (const Trace& t : corpus.traces) total += TraceReuseCeiling(t);
  return total;
}

}  // namespace kvpool::trace
