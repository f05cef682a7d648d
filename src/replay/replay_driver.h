// ReplayDriver: replays agent session trees against a Deployment (agentx-format.md).
//
// Lanes: `sessions` concurrent session trees, started together or spread over `ramp_s`. A lane's first tree starts at a random main
// turn k (25-75% of its turns): it sends turn k-1 as a primer (the full prefix, so the
// caches see the session as a live one would) and `warmup_requests` further main turns, none
// of which count in the metrics (nor do subagents they spawn). When a tree finishes, the
// lane takes the next trace from turn 0, all counted.
// Threads: a tree's main thread sends turn j+1 after turn j's answer plus the recorded gap
// (t[j+1] - (t[j] + api_time[j])) and after every subagent gating turn j+1 finished;
// subagents spawned after turn j (trace.h: spawned_after_turn) run in parallel, each its own
// thread with its own recorded gaps. Every wait is capped at `idle_cap_s` (the 300 s idle
// cap, applied per wait). Output length is the recorded one (capped at `max_output_tokens`). Prompt tokens come from the
// recorded hash_ids (token_content.h), so reuse is exactly what the trace allows.
// Paced arrivals (`arrival_rate` > 0, the production-style replay): main turns no longer follow
// the recorded gaps. One Poisson process at `arrival_rate` requests/s over all lanes picks, at
// each arrival, a lane whose next main turn may go (its answer back, its gating subagents
// done) uniformly at random, so a session's turns keep their order but arrive at the load's
// rate; with no such lane the arrival waits for the first one. Subagents keep their gaps.
// Retention hints (retention): see ReplayOptions.
// Measurement: starts when 90% of the lanes have finished their warm-up and lasts
// `duration_s` emulated seconds, or until `max_requests` counted requests finished
// (whichever first).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "engine/request_sink.h"
#include "engine/request_record.h"
#include "engine/simulation.h"
#include "replay/return_predictor.h"
#include "replay/trace_driver.h"
#include "trace/reuse_ceiling.h"
#include "trace/trace.h"

namespace kvpool::replay {

struct ReplayOptions {
  int sessions = 8;
  double duration_s = 600;   // emulated seconds measured after warm-up; 0 = no limit
  int64_t max_requests = 0;  // counted requests to finish; 0 = no limit
  int warmup_requests = 2;
  // Lane i starts at i * ramp_s / sessions (0: every lane at once, the published warm-up
  // that primes every session together).
  double ramp_s = 0;
  double idle_cap_s = 300;
  uint64_t seed = 1;
  // Open loop only: the trace's request rate is multiplied by this (timestamps divided by it).
  double rate_scale = 1;
  // > 0: main turns paced by one Poisson process at this many requests/s over all lanes.
  double arrival_rate = 0;
  // The client's max_tokens. > 0: every request asks for at most this many and generates its
  // recorded output capped at it (the production replay asks for 32,000). 0: each asks for
  // exactly its recorded output and forces that length, as the published AgentX harness does.
  int64_t max_output_tokens = 0;
  // The router's hints to the pool (issue 18; Deployment::RetainSession): after each request
  // the thread's history (a session's main thread, or a subagent's) is retained for about its
  // wait before its next request, expected back when that wait ends; when its next turn
  // arrives, again for the idle cap, expected at once, so that it lasts while the turn queues
  // for prefill and goes before waiting threads' histories. In emulated time (the embedded
  // pool's clock; an existing pool reads them in its own real time, the replay's only at
  // --speedup 1). With paced arrivals, a waiting session is held for twice the idle cap,
  // expected back after it.
  //   kPredicted: the wait is what ReturnPredictor makes of the waits seen so far (never the
  //     trace's future), and a main thread still away when due is predicted again from the
  //     time it has been idle; a thread that ended is held like one that waits, until the
  //     predictor takes it for gone.
  //   kOracle: the recorded wait (capped), held for twice it, and a thread's history released
  //     (first to evict) when the trace says it ended: an upper bound no router can reach.
  //   kLru: no hints (plain LRU). Without a pool, nothing is sent.
  enum class Retention { kLru, kPredicted, kOracle };
  Retention retention = Retention::kLru;
  // Supersession (issue 44): when a thread's prompt no longer continues its previous one (it was
  // compacted, or diverged after a long pause), the router releases the previous prompt's chunks
  // from the first changed one on (first to evict): they are no thread's future prefix. What a
  // router sees, two prompts of one thread; without a pool, nothing is sent. On by default: at
  // 112 sessions with half the pool it gave +6.4 points of reuse, and nothing changed at the
  // default size (docs/benchmarks.md, "Session-aware retention").
  bool supersede = true;
};

// Sets `r`'s output_tokens and max_tokens the way the client of `options` asks for a request
// that recorded `recorded_output` tokens.
void SetRequestOutput(const ReplayOptions& options, int64_t recorded_output, engine::DeploymentRequest* r);

class ReplayDriver final : public TraceDriver {
 public:
  // REQUIRES: corpus, sink and sim outlive the driver.
  ReplayDriver(const trace::Corpus& corpus, ReplayOptions options, engine::RequestSink* sink, engine::Simulation* sim);
  ~ReplayDriver() override;
  ReplayDriver(const ReplayDriver&) = delete;
  ReplayDriver& operator=(const ReplayDriver&) = delete;

  // Picks the usable traces (those that fit the deployment) and starts every lane.
  // INVALID_ARGUMENT when no trace fits or options make no sense.
  Status Start() override;

  const std::vector<engine::RequestRecord>& records() const override { return records_; }
  // Until 90% of the lanes warmed up, the window starts at the first counted request's arrival.
  double window_start_s() const override;
  double window_end_s() const override { return stop_time_ ? *stop_time_ : sim_->now(); }
  int64_t counted_finished() const override { return counted_finished_; }
  int64_t traces_skipped() const override { return traces_skipped_; }
  int64_t trees_started() const { return trees_started_; }
  size_t lanes_warm() const override { return lanes_warm_; }
  bool window_open() const override { return window_opened_at_.has_value(); }
  // With predicted retention: how the predictions did.
  ReturnPredictionScore return_predictions() const { return predictor_.score(); }

 private:
  struct Tree;
  struct Lane;
  void StartTree(Lane& lane, bool from_random_point);
  void SendMain(Tree& tree);
  void OnMainDone(Tree& tree, size_t turn, const engine::RequestRecord& record);
  void TrySendMain(Tree& tree);
  void ScheduleArrival();
  void OnArrival();
  void StartSubagent(Tree& tree, size_t subagent, bool counted);
  void SendSubagentRequest(Tree& tree, size_t subagent, size_t index, bool counted);
  void OnSubagentDone(Tree& tree, size_t subagent);
  void MaybeFinishTree(Tree& tree);
  // `prompt`, when not null, receives the request's prompt tokens.
  void Send(Tree& tree, const trace::Request& request, bool counted, std::function<void(const engine::RequestRecord&)> then,
            std::vector<connector::TokenId>* prompt = nullptr);
  // Retention hints: tells the pool to keep the history whose latest prompt is `prompt` (a main
  // session's or a subagent's) for `hold_s` emulated seconds, its next use expected in
  // `reuse_in_s` (0: a turn of it is queued); no-op without hints.
  void RetainPrompt(const std::vector<connector::TokenId>& prompt, double hold_s, double reuse_in_s);
  // Thread `thread`'s request ended with `stop_reason`, its next one due in `recorded_gap_s`
  // (what the trace says: only the oracle reads it): retains its history until then. Returns
  // the prediction the predicted hints made.
  std::optional<ReturnPrediction> RetainWaiting(const std::vector<connector::TokenId>& prompt, uint64_t thread,
                                                bool subagent, const std::string& stop_reason, double recorded_gap_s);
  // Whether each thread's latest prompt is kept (for hints or supersession).
  bool KeepsPrompts() const {
    return options_.retention != ReplayOptions::Retention::kLru || options_.supersede;
  }
  // The history's thread ended: the oracle releases it (first to evict); `prompt` is cleared.
  void ReleasePrompt(std::vector<connector::TokenId>* prompt);
  // Predicted hints: when the main thread of `tree` is due back in `due_in_s` and is still away
  // then (the same wait), predicts its remaining wait from the time it has been idle and
  // re-ranks the hint on `prompt` by it (a wait that ran long is likely to run longer), until
  // the hint lapses at `hold_until_s`. Runs on after the tree ended: a router cannot tell.
  void RenewWhenDue(Tree& tree, uint64_t wait, std::shared_ptr<const std::vector<connector::TokenId>> prompt,
                    double due_in_s, double hold_until_s);
  void Record(const engine::RequestRecord& record);
  void MarkLaneWarm(Lane& lane);
  void StopAt(double time);
  double CappedGap(double next_start, double previous_end) const;

  const trace::Corpus& corpus_;
  const ReplayOptions options_;
  engine::RequestSink* const sink_;
  engine::Simulation* const sim_;

  std::vector<const trace::Trace*> usable_;
  size_t next_trace_ = 0;
  uint64_t next_session_id_ = 1;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<engine::RequestRecord> records_;
  int64_t counted_finished_ = 0;
  int64_t traces_skipped_ = 0;
  int64_t trees_started_ = 0;
  size_t lanes_warm_ = 0;
  std::optional<double> window_opened_at_;
  std::optional<double> first_counted_arrival_;
  std::optional<double> stop_time_;
  uint64_t rng_state_;
  // Paced arrivals: trees whose next main turn may go, and arrivals that found none.
  std::vector<Tree*> due_;
  int64_t waiting_arrivals_ = 0;
  uint64_t arrival_rng_;
  ReturnPredictor predictor_;
};

}  // namespace kvpool::replay
