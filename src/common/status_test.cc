#include "common/status.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

Status FailWhenNegative(int x) {
  if (x < 0) return InvalidArgument("x must be >= 0");
  return Status::Ok();
}

Status Chain(int x) {
  KVPOOL_RETURN_IF_ERROR(FailWhenNegative(x));
  return NotFound("reached the end");
}

TEST(Status, CarriesCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status s = NoSpace("pool full");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NO_SPACE: pool full");
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
  EXPECT_EQ(Chain(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Chain(1).code(), StatusCode::kNotFound);
}

TEST(Result, HoldsAValueOrAStatus) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = Timeout("slow");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kTimeout);
}

}  // namespace
}  // namespace kvpool
