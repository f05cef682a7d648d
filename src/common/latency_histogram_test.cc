#include "common/latency_histogram.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

TEST(LatencyHistogram, BucketsAreCumulativeWithSumAndCountAndAddMerges) {
  LatencyHistogram h;
  h.Observe(0.0002);  // under the first bound
  h.Observe(0.001);   // on a bound: counted in it (le)
  h.Observe(0.3);
  h.Observe(60);      // above every bound: +Inf only
  LatencyHistogram other;
  other.Observe(0.3);
  h.Add(other);
  EXPECT_EQ(h.count(), 5u);
  std::string text;
  h.AppendTo(&text, "x_seconds", "help", "a=\"1\"");
  for (const char* line : {"# TYPE x_seconds histogram\n", "x_seconds_bucket{a=\"1\",le=\"0.0005\"} 1\n",
                           "x_seconds_bucket{a=\"1\",le=\"0.001\"} 2\n", "x_seconds_bucket{a=\"1\",le=\"0.25\"} 2\n",
                           "x_seconds_bucket{a=\"1\",le=\"0.5\"} 4\n", "x_seconds_bucket{a=\"1\",le=\"10\"} 4\n",
                           "x_seconds_bucket{a=\"1\",le=\"+Inf\"} 5\n", "x_seconds_sum{a=\"1\"} 60.601200000\n",
                           "x_seconds_count{a=\"1\"} 5\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

}  // namespace
}  // namespace kvpool
