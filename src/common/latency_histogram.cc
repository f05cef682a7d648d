#include "common/latency_histogram.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvpool {

LatencyHistogram::LatencyHistogram(std::span<const double> bounds)
    : bounds_(bounds.first(std::min(bounds.size(), kMaxBounds))) {}

void LatencyHistogram::Observe(double seconds) {
  ObserveNs(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9));
}

void LatencyHistogram::ObserveNs(uint64_t nanoseconds) {
  const double seconds = static_cast<double>(nanoseconds) * 1e-9;
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(nanoseconds, std::memory_order_relaxed);
}

void LatencyHistogram::Add(const LatencyHistogram& other) {
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    counts_[i].fetch_add(other.counts_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  sum_ns_.fetch_add(other.sum_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

uint64_t LatencyHistogram::count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) n += counts_[i].load(std::memory_order_relaxed);
  return n;
}

void LatencyHistogram::AppendSeries(std::string* out, std::string_view name, std::string_view labels) const {
  const std::string sep = labels.empty() ? "" : std::string(labels) + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    out->append(fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, sep, le, cumulative));
  }
  const std::string braces = labels.empty() ? "" : "{" + std::string(labels) + "}";
  out->append(fmt::format("{}_sum{} {:.9f}\n{}_count{} {}\n", name, braces,
                          static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9, name, braces,
                          cumulative));
}

void LatencyHistogram::AppendTo(std::string* out, std::string_view name, std::string_view help,
                                std::string_view labels) const {
  out->append(fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help));
  AppendSeries(out, name, labels);
}

}  // namespace kvpool
