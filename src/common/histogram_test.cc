#include "common/histogram.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

TEST(Histogram, BucketsAreCumulativeWithSumAndCountAndAddMerges) {
  Histogram h;
  h.Observe(0.0002);  // under the first bound
  h.Observe(0.001);   // on a bound: counted in it (le)
  h.Observe(0.3);
  h.Observe(60);      // above every bound: +Inf only
  Histogram other;
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

TEST(Histogram, SizesInBytesKeepAWholeSum) {
  Histogram h(Histogram::kSizeBounds, Histogram::Unit::kBytes);
  h.ObserveSteps(4096);         // on the first bound
  h.ObserveSteps(8 << 20);      // between 4 MiB and 16 MiB
  h.Observe(3.0 * (1 << 30));   // above every bound
  std::string text;
  h.AppendTo(&text, "x_bytes", "help");
  for (const char* line : {"x_bytes_bucket{le=\"4096\"} 1\n", "x_bytes_bucket{le=\"4194304\"} 1\n",
                           "x_bytes_bucket{le=\"16777216\"} 2\n", "x_bytes_bucket{le=\"1073741824\"} 2\n",
                           "x_bytes_bucket{le=\"+Inf\"} 3\n", "x_bytes_sum 3229618176\n", "x_bytes_count 3\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

}  // namespace
}  // namespace kvpool
