#include "replay/return_predictor.h"

#include <algorithm>
#include <cmath>

namespace kvpool::replay {
namespace {

std::string Kind(bool subagent) { return subagent ? "subagent" : "main"; }

double Quantile(std::vector<double>& values, double q) {
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<long>(at), values.end());
  return values[at];
}

}  // namespace

ReturnPrediction ReturnPredictor::FromWaits(std::vector<double> waits, std::string basis) {
  ReturnPrediction p;
  p.basis = std::move(basis);
  p.expected_s = Quantile(waits, 0.5);
  p.hold_s = std::max(p.expected_s, Quantile(waits, kHoldQuantile));
  return p;
}

void ReturnPredictor::Remember(std::deque<double>& window, double wait_s) {
  window.push_back(wait_s);
  if (window.size() > kWindow) window.pop_front();
}

std::pair<std::vector<double>, std::string> ReturnPredictor::Basis(uint64_t thread, bool subagent,
                                                                   const std::string& end, bool own) const {
  if (auto t = threads_.find(thread); own && t != threads_.end()) {
    if (auto it = t->second.by_end.find(end); it != t->second.by_end.end() && it->second.size() >= kOwnWaits) {
      return {it->second, "own"};
    }
  }
  if (auto k = pooled_.find(Kind(subagent) + "|" + end); k != pooled_.end() && k->second.size() >= kPooledWaits) {
    return {{k->second.begin(), k->second.end()}, "kind+end"};
  }
  if (auto any = pooled_.find(Kind(subagent)); any != pooled_.end() && any->second.size() >= kPooledWaits) {
    return {{any->second.begin(), any->second.end()}, "kind"};
  }
  return {{}, "none"};
}

ReturnPrediction ReturnPredictor::Predict(uint64_t thread, bool subagent, std::string_view stop_reason) {
  auto [waits, basis] = Basis(thread, subagent, std::string(stop_reason), /*own=*/true);
  const ReturnPrediction p =
      waits.empty() ? ReturnPrediction{idle_cap_s_ / 2, idle_cap_s_, "none"} : FromWaits(std::move(waits), basis);
  threads_[thread].pending = p;
  return p;
}

std::optional<ReturnPrediction> ReturnPredictor::PredictRemaining(uint64_t thread, bool subagent,
                                                                  std::string_view stop_reason, double idle_s) const {
  auto [waits, basis] = Basis(thread, subagent, std::string(stop_reason), /*own=*/false);
  std::vector<double> longer;
  for (double w : waits) {
    if (w > idle_s) longer.push_back(w - idle_s);
  }
  if (longer.size() < kStillAway) return std::nullopt;
  return FromWaits(std::move(longer), basis);
}

void ReturnPredictor::Observe(uint64_t thread, bool subagent, std::string_view stop_reason, double wait_s) {
  ThreadWaits& own = threads_[thread];
  const std::string end(stop_reason);
  if (own.pending) {
    // A wait of 0 (the next request was already due) scores against a floor of 10 ms.
    ratios_.push_back(std::max(own.pending->expected_s, 0.01) / std::max(wait_s, 0.01));
    within_hold_ += wait_s <= own.pending->hold_s ? 1 : 0;
    ++by_basis_[own.pending->basis];
    own.pending.reset();
  }
  own.by_end[end].push_back(wait_s);
  Remember(pooled_[Kind(subagent) + "|" + end], wait_s);
  Remember(pooled_[Kind(subagent)], wait_s);
}

ReturnPredictionScore ReturnPredictor::score() const {
  ReturnPredictionScore s;
  s.scored = static_cast<int64_t>(ratios_.size());
  s.returned_within_hold = within_hold_;
  s.by_basis = by_basis_;
  if (ratios_.empty()) return s;
  std::vector<double> ratios = ratios_, errors;
  for (double r : ratios_) errors.push_back(std::abs(std::log(r)));
  s.median_ratio = Quantile(ratios, 0.5);
  s.median_abs_log_ratio = Quantile(errors, 0.5);
  return s;
}

}  // namespace kvpool::replay
