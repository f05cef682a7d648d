// LatencyHistogram: seconds in fixed buckets (0.5 ms to 10 s), for a process's /metrics as a
// Prometheus histogram. Lock-free: observed and read from any thread at any time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvpool {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 13> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,    0.25,  0.5,    1,     2.5,   10};
  void Observe(double seconds);
  void Add(const LatencyHistogram& other);  // this += other
  uint64_t count() const;
  // HELP, TYPE, the cumulative _bucket lines, _sum and _count. `labels` as in AppendMetric.
  void AppendTo(std::string* out, std::string_view name, std::string_view help, std::string_view labels = {}) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};  // the last: above every bound
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace kvpool
