#include "replay/return_predictor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvpool::replay {
namespace {

TEST(ReturnPredictorTest, KnowsNothingUntilItHasSeenWaits) {
  ReturnPredictor p(300);
  const ReturnPrediction first = p.Predict(1, false, "tool_use");
  EXPECT_EQ(first.basis, "none");
  EXPECT_DOUBLE_EQ(first.expected_s, 150);
  EXPECT_DOUBLE_EQ(first.hold_s, 300);
}

TEST(ReturnPredictorTest, LearnsEachEndsWaitsAcrossThreadsOfOneKind) {
  ReturnPredictor p(300);
  // 40 sessions, one wait each: after a tool call 10-29 s, after a final answer 100-290 s.
  for (uint64_t t = 0; t < 20; ++t) p.Observe(t, false, "tool_use", 10 + static_cast<double>(t));
  for (uint64_t t = 20; t < 40; ++t) p.Observe(t, false, "end_turn", 100 + 10 * static_cast<double>(t - 20));
  const ReturnPrediction tool = p.Predict(99, false, "tool_use");
  EXPECT_EQ(tool.basis, "kind+end");
  EXPECT_DOUBLE_EQ(tool.expected_s, 20);  // the median of 10..29
  EXPECT_DOUBLE_EQ(tool.hold_s, 28);      // the 90th percentile
  const ReturnPrediction answer = p.Predict(98, false, "end_turn");
  EXPECT_DOUBLE_EQ(answer.expected_s, 200);
  // An end never seen falls back to every wait of the kind; subagents' waits are their own.
  EXPECT_EQ(p.Predict(97, false, "").basis, "kind");
  EXPECT_EQ(p.Predict(96, true, "tool_use").basis, "none");
}

TEST(ReturnPredictorTest, AThreadsOwnWaitsWinOnceItHasEnough) {
  ReturnPredictor p(300);
  for (uint64_t t = 100; t < 130; ++t) p.Observe(t, false, "tool_use", 20);
  for (int i = 0; i < 2; ++i) p.Observe(7, false, "tool_use", 2);  // a fast one
  EXPECT_EQ(p.Predict(7, false, "tool_use").basis, "kind+end");  // two of its own are not enough
  p.Observe(7, false, "tool_use", 2);
  const ReturnPrediction own = p.Predict(7, false, "tool_use");
  EXPECT_EQ(own.basis, "own");
  EXPECT_DOUBLE_EQ(own.expected_s, 2);
}

TEST(ReturnPredictorTest, ScoresEachPredictionWhenTheThreadComesBack) {
  ReturnPredictor p(300);
  for (uint64_t t = 0; t < 20; ++t) p.Observe(t, false, "tool_use", 10);
  p.Predict(50, false, "tool_use");  // expects 10 s, holds 10 s
  p.Observe(50, false, "tool_use", 20);
  p.Predict(51, false, "tool_use");
  p.Observe(51, false, "tool_use", 10);
  p.Predict(52, false, "tool_use");
  p.Forget(52);  // gone without coming back: never scored
  const ReturnPredictionScore s = p.score();
  EXPECT_EQ(s.scored, 2);
  EXPECT_EQ(s.returned_within_hold, 1);
  EXPECT_EQ(s.by_basis.at("kind+end"), 2);
  EXPECT_NEAR(s.median_ratio, 1, 1e-9);  // of {0.5, 1}: the upper middle
  EXPECT_NEAR(s.median_abs_log_ratio, std::log(2.0), 1e-9);
}

// A wait that ran past its expected time is predicted again from the waits that ran longer.
TEST(ReturnPredictorTest, AThreadStillAwayIsExpectedLaterAndAtLastTakenForGone) {
  ReturnPredictor p(300);
  for (uint64_t t = 0; t < 100; ++t) p.Observe(t, false, "tool_use", static_cast<double>(t + 1));  // 1..100 s
  EXPECT_DOUBLE_EQ(p.Predict(500, false, "tool_use").expected_s, 51);
  const auto later = p.PredictRemaining(500, false, "tool_use", 60);  // 61..100 s: 1..40 s to go
  ASSERT_TRUE(later.has_value());
  EXPECT_DOUBLE_EQ(later->expected_s, 21);
  EXPECT_FALSE(p.PredictRemaining(500, false, "tool_use", 96).has_value());  // four waits were longer
}

}  // namespace
}  // namespace kvpool::replay
