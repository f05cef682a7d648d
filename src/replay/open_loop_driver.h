// OpenLoopDriver: replays a trace by timestamp, open loop — the Mooncake FAST'25 format's
// semantics (agentx-format.md §2). Every request of the corpus's single trace is submitted at
// its recorded time (relative to the first request, divided by `rate_scale`), whatever the
// deployment is doing: a deployment that falls behind sees its queues grow, as a real one
// would. Prompt tokens come from the file's global hash_ids with one salt for the whole file,
// so equal ids are the same KV in every request. Each request is its own session (no lane
// carries state between requests; the router places it by power of two choices).
// Measurement: the first `warmup_requests` requests are not counted; the window opens at the
// first counted request's arrival and lasts `duration_s` emulated seconds (0: until the trace
// ends), or until `max_requests` counted requests finished.
// Requests that do not fit the deployment (context, a prefill cache, a decode instance) are
// skipped and reported as traces_skipped().
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/request_sink.h"
#include "replay/replay_driver.h"
#include "engine/simulation.h"
#include "replay/trace_driver.h"
#include "trace/reuse_ceiling.h"
#include "trace/trace.h"

namespace kvpool::replay {

class OpenLoopDriver final : public TraceDriver {
 public:
  // REQUIRES: corpus, sink and sim outlive the driver. Uses options.duration_s,
  // max_requests, warmup_requests, seed and rate_scale.
  OpenLoopDriver(const trace::Corpus& corpus, ReplayOptions options, engine::RequestSink* sink, engine::Simulation* sim);

  // INVALID_ARGUMENT unless the corpus is one trace with requests (a Mooncake file) and
  // rate_scale > 0.
  Status Start() override;

  const std::vector<engine::RequestRecord>& records() const override { return records_; }
  double window_start_s() const override { return first_counted_arrival_.value_or(0); }
  double window_end_s() const override { return stop_time_ ? *stop_time_ : sim_->now(); }
  bool window_open() const override { return first_counted_arrival_.has_value(); }
  int64_t counted_finished() const override { return counted_finished_; }
  int64_t traces_skipped() const override { return skipped_; }
  size_t lanes_warm() const override { return 0; }

 private:
  void Submit(size_t index);
  void StopAt(double time);

  const trace::Corpus& corpus_;
  const ReplayOptions options_;
  engine::RequestSink* const sink_;
  engine::Simulation* const sim_;
  const trace::Trace* trace_ = nullptr;
  uint64_t salt_ = 0;
  int64_t fits_ = 0;
  trace::PrefixHitWalk ceiling_walk_;
  size_t submitted_ = 0;  // requests submitted so far (skipped ones included)
  std::vector<engine::RequestRecord> records_;
  int64_t counted_finished_ = 0;
  int64_t skipped_ = 0;
  std::optional<double> first_counted_arrival_;
  std::optional<double> stop_time_;
};

}  // namespace kvpool::replay
