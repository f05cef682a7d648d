// LatencyHistogram: seconds in fixed buckets, for a process's /metrics as a Prometheus
// histogram (the master's RPC latencies, the connector's lookups and restores). Lock-free:
// observed and read from any thread at any time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvpool {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets, in seconds (the `le` labels); a last one, +Inf, is implicit.
  static constexpr std::array<double, 13> kDefaultBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,    0.25,  0.5,    1,     2.5,   10};
  static constexpr size_t kMaxBounds = 24;

  // REQUIRES: `bounds` ascending, at most kMaxBounds of them, outliving the histogram.
  explicit LatencyHistogram(std::span<const double> bounds = kDefaultBounds);
  void Observe(double seconds);
  void ObserveNs(uint64_t nanoseconds);  // the same, with the sum kept to the nanosecond
  void Add(const LatencyHistogram& other);  // this += other. REQUIRES: the same bounds
  uint64_t count() const;
  // One series' cumulative _bucket lines, _sum and _count (`labels` as in AppendMetric), without
  // HELP and TYPE: several labelled series share one header.
  void AppendSeries(std::string* out, std::string_view name, std::string_view labels = {}) const;
  // HELP, TYPE, then the series.
  void AppendTo(std::string* out, std::string_view name, std::string_view help, std::string_view labels = {}) const;

 private:
  std::span<const double> bounds_;
  std::array<std::atomic<uint64_t>, kMaxBounds + 1> counts_{};  // [bounds_.size()]: above every bound
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace kvpool
