// ReturnPredictor: when a waiting session (or subagent) comes back, predicted from what a router
// has seen — never from the trace's future (issue 44).
//
// A thread (a session's main thread, or one subagent) waits after each request for its next
// one. What predicts the wait, in this order:
//   1. the thread's own earlier waits after a request that ended the same way (the request's
//      stop reason: a pending tool call, a final answer), once it has kOwnWaits of them;
//   2. the waits of every thread of the same kind (main or subagent) after such an end, once
//      the run has seen kPooledWaits of them (the most recent kWindow count);
//   3. the waits of every thread of the same kind, whatever the end, likewise;
//   4. otherwise nothing is known yet: back within the idle cap, expected half way.
// The prediction is the median of the chosen waits (when it is expected back) and their
// kHoldQuantile quantile (how long a hint holds it). A thread still away when it was expected
// is predicted again from the time it has been idle (PredictRemaining: of its kind's waits after
// such an end, those longer than that, less it): a wait that has run long is likely to run longer, and should not
// be ranked as if due. Once fewer than kStillAway of them are that long, it is treated as gone
// and its history as any other. A thread that ended is never told apart from one that waits:
// nothing a router sees says which.
//
// Each observed wait also scores the prediction made for it (error: log of predicted over
// actual expected time; and whether it came back within the hold).
// Not thread-safe (the replay's event loop).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvpool::replay {

struct ReturnPrediction {
  double expected_s = 0;  // the median wait of what it is based on
  double hold_s = 0;      // the wait a hint should last for
  std::string basis;      // "own", "kind+end", "kind", "none"
};

// How good the predictions were, over the waits they were made for.
struct ReturnPredictionScore {
  int64_t scored = 0;
  int64_t returned_within_hold = 0;
  // Of predicted expected wait over the actual wait, the median of |ln(ratio)| (0: exact; ln 2:
  // off by a factor of 2), and the median ratio (above 1: predicted later than it came).
  double median_abs_log_ratio = 0;
  double median_ratio = 0;
  std::map<std::string, int64_t> by_basis;  // predictions scored, per basis
};

class ReturnPredictor {
 public:
  static constexpr size_t kOwnWaits = 3;
  static constexpr size_t kPooledWaits = 20;
  static constexpr size_t kWindow = 4096;
  static constexpr double kHoldQuantile = 0.9;
  static constexpr size_t kStillAway = 5;

  // `idle_cap_s`: the longest wait there is (the replay caps every wait at it).
  explicit ReturnPredictor(double idle_cap_s) : idle_cap_s_(idle_cap_s) {}

  // Thread `thread` (of kind `subagent` or main) finished a request that ended with
  // `stop_reason`: the prediction for its wait, remembered to be scored when it comes back.
  ReturnPrediction Predict(uint64_t thread, bool subagent, std::string_view stop_reason);
  // The same thread, idle for `idle_s` since that request: its remaining wait, from the waits of
  // its kind after such an end (a thread's own are too few to tell a long tail) longer than
  // `idle_s`; none when too few were (it is treated as gone).
  std::optional<ReturnPrediction> PredictRemaining(uint64_t thread, bool subagent, std::string_view stop_reason,
                                                   double idle_s) const;
  // Thread `thread` came back `wait_s` after its last request, which ended with `stop_reason`.
  void Observe(uint64_t thread, bool subagent, std::string_view stop_reason, double wait_s);
  // The thread is gone (its tree finished): forget it.
  void Forget(uint64_t thread) { threads_.erase(thread); }

  ReturnPredictionScore score() const;

 private:
  struct ThreadWaits {
    std::unordered_map<std::string, std::vector<double>> by_end;
    std::optional<ReturnPrediction> pending;  // made for the wait now going on
  };
  static ReturnPrediction FromWaits(std::vector<double> waits, std::string basis);
  // The waits a prediction for such a thread and end is made from, and their basis; empty
  // (basis "none") when too few are known. `own`: the thread's own may be the basis.
  std::pair<std::vector<double>, std::string> Basis(uint64_t thread, bool subagent, const std::string& end,
                                                    bool own) const;
  static void Remember(std::deque<double>& window, double wait_s);

  const double idle_cap_s_;
  std::unordered_map<uint64_t, ThreadWaits> threads_;
  std::map<std::string, std::deque<double>> pooled_;  // "main|tool_use", "main", ...
  std::vector<double> ratios_;
  int64_t within_hold_ = 0;
  std::map<std::string, int64_t> by_basis_;
};

}  // namespace kvpool::replay
