// Histogram: observations in fixed buckets, for a process's /metrics as a Prometheus histogram
// — latencies in seconds (the master's RPCs, the connector's lookups and restores, handoffs)
// and sizes in bytes (transfer requests, handoffs). Each observation is kept as a whole number
// of the unit's smallest step (a nanosecond, a byte), so the _sum is exact. Lock-free: observed
// and read from any thread at any time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvpool {

class Histogram {
 public:
  enum class Unit { kSeconds, kBytes };
  // Upper bounds of the buckets (the `le` labels), in seconds or bytes; +Inf is implicit.
  static constexpr std::array<double, 13> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,    0.25,  0.5,    1,     2.5,   10};
  // 4 KiB to 1 GiB, by fours.
  static constexpr std::array<double, 10> kSizeBounds = {4096,     16384,     65536,     262144,     1048576,
                                                         4194304,  16777216,  67108864,  268435456,  1073741824};
  static constexpr size_t kMaxBounds = 24;

  // REQUIRES: `bounds` ascending, at most kMaxBounds of them, outliving the histogram.
  explicit Histogram(std::span<const double> bounds = kLatencyBounds, Unit unit = Unit::kSeconds);
  void Observe(double value);       // seconds or bytes
  void ObserveSteps(uint64_t steps);  // nanoseconds or bytes: the sum stays exact
  void ObserveNs(uint64_t nanoseconds) { ObserveSteps(nanoseconds); }  // REQUIRES: Unit::kSeconds
  void Add(const Histogram& other);  // this += other. REQUIRES: the same bounds and unit
  uint64_t count() const;
  // One series' cumulative _bucket lines, _sum and _count (`labels` as in AppendMetric), without
  // HELP and TYPE: several labelled series share one header.
  void AppendSeries(std::string* out, std::string_view name, std::string_view labels = {}) const;
  // HELP, TYPE, then the series.
  void AppendTo(std::string* out, std::string_view name, std::string_view help, std::string_view labels = {}) const;

 private:
  double step() const { return unit_ == Unit::kSeconds ? 1e-9 : 1.0; }  // one step in the unit

  std::span<const double> bounds_;
  Unit unit_;
  std::array<std::atomic<uint64_t>, kMaxBounds + 1> counts_{};  // [bounds_.size()]: above every bound
  std::atomic<uint64_t> sum_steps_{0};
};

}  // namespace kvpool
