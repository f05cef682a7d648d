#include "common/histogram.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/prometheus_text.h"

namespace kvpool {

Histogram::Histogram(std::span<const double> bounds, Unit unit)
    : bounds_(bounds.first(std::min(bounds.size(), kMaxBounds))), unit_(unit) {}

void Histogram::Observe(double value) {
  ObserveSteps(static_cast<uint64_t>(std::llround(std::max(0.0, value) / step())));
}

void Histogram::ObserveSteps(uint64_t steps) {
  const double value = static_cast<double>(steps) * step();
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_steps_.fetch_add(steps, std::memory_order_relaxed);
}

void Histogram::Add(const Histogram& other) {
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    counts_[i].fetch_add(other.counts_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  sum_steps_.fetch_add(other.sum_steps_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

uint64_t Histogram::count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) n += counts_[i].load(std::memory_order_relaxed);
  return n;
}

void Histogram::AppendSeries(std::string* out, std::string_view name, std::string_view labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    const std::string bucket_labels = JoinLabels(labels, fmt::format("le=\"{}\"", le));
    out->append(fmt::format("{}_bucket{{{}}} {}\n", name, bucket_labels, cumulative));
  }
  const std::string braces = labels.empty() ? "" : fmt::format("{{{}}}", labels);
  const uint64_t sum = sum_steps_.load(std::memory_order_relaxed);
  const std::string sum_text =
      unit_ == Unit::kSeconds ? fmt::format("{:.9f}", static_cast<double>(sum) * 1e-9) : fmt::format("{}", sum);
  out->append(fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_text, name, braces, cumulative));
}

void Histogram::AppendTo(std::string* out, std::string_view name, std::string_view help,
                         std::string_view labels) const {
  AppendHeader(out, name, "histogram", help);
  AppendSeries(out, name, labels);
}

}  // namespace kvpool
