#include "replay/open_loop_driver.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/kv_pattern_word.h"
#include "replay/token_content.h"

namespace kvpool::replay {

OpenLoopDriver::OpenLoopDriver(const trace::Corpus& corpus, ReplayOptions options, engine::RequestSink* sink,
                               engine::Simulation* sim)
    : corpus_(corpus), options_(options), sink_(sink), sim_(sim) {}

Status OpenLoopDriver::Start() {
  if (corpus_.traces.size() != 1 || corpus_.traces[0].requests.empty()) {
    return InvalidArgument(fmt::format(
        "replay: open loop replays one trace of timestamped requests (a Mooncake file); this corpus has {} traces",
        corpus_.traces.size()));
  }
  if (!(options_.rate_scale > 0)) return InvalidArgument("replay: --rate-scale must be above 0");
  trace_ = &corpus_.traces[0];
  const engine::ModelGeometry& g = sink_->geometry();
  fits_ = std::min<int64_t>({g.max_context_tokens, static_cast<int64_t>(g.prefill_cache_tokens),
                             static_cast<int64_t>(g.decode_kv_tokens)});
  salt_ = engine::Mix64(options_.seed);
  // Requests are submitted one at a time, each scheduling the next: the event queue holds one
  // arrival, not the whole file.
  sim_->At(sim_->now(), [this] { Submit(0); });
  return Status::Ok();
}

void OpenLoopDriver::Submit(size_t index) {
  if (stop_time_ || index >= trace_->requests.size()) return;
  const trace::Request& request = trace_->requests[index];
  const double t0 = trace_->requests[0].start_time_s;
  // The next arrival first, so it is due at its time whatever this one does.
  if (index + 1 < trace_->requests.size()) {
    const double next = (trace_->requests[index + 1].start_time_s - t0) / options_.rate_scale;
    sim_->At(std::max(sim_->now(), next), [this, index] { Submit(index + 1); });
  }
  const int64_t hits = ceiling_walk_.Visit(request.hash_ids);  // every request, as the trace's ceiling does
  const int64_t reserved_output = options_.max_output_tokens > 0 ? options_.max_output_tokens : request.output_tokens;
  if (request.input_tokens + std::max<int64_t>(1, reserved_output) > fits_ || request.input_tokens < 1) {
    ++skipped_;
    return;
  }
  const bool counted = static_cast<int64_t>(index) >= options_.warmup_requests;
  if (counted && !first_counted_arrival_) {
    first_counted_arrival_ = sim_->now();
    if (options_.duration_s > 0) sim_->At(sim_->now() + options_.duration_s, [this] { StopAt(sim_->now()); });
  }
  engine::DeploymentRequest r;
  r.session_id = index + 1;
  r.tokens = PromptTokens(request.hash_ids, trace_->block_size, request.input_tokens, salt_);
  SetRequestOutput(options_, request.output_tokens, &r);
  r.counted = counted;
  const uint64_t ceiling_tokens =
      static_cast<uint64_t>(std::min<int64_t>(hits * trace_->block_size, request.input_tokens));
  sink_->Submit(std::move(r), [this, ceiling_tokens](const engine::RequestRecord& done) {
    engine::RequestRecord copy = done;
    copy.ceiling_hit_tokens = ceiling_tokens;
    records_.push_back(copy);
    if (!copy.counted) return;
    ++counted_finished_;
    if (options_.max_requests > 0 && counted_finished_ >= options_.max_requests) StopAt(sim_->now());
  });
}

void OpenLoopDriver::StopAt(double time) {
  if (stop_time_) return;
  stop_time_ = time;
  sim_->Stop();
}

}  // namespace kvpool::replay
