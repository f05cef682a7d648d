#include "common/byte_size.h"

#include <gtest/gtest.h>

namespace kvpool {
namespace {

TEST(ParseByteSize, AcceptsPlainNumbersAndBinaryUnits) {
  EXPECT_EQ(ParseByteSize("0").value(), 0u);
  EXPECT_EQ(ParseByteSize("1048576").value(), 1048576u);
  EXPECT_EQ(ParseByteSize("64k").value(), 64u << 10);
  EXPECT_EQ(ParseByteSize("64KiB").value(), 64u << 10);
  EXPECT_EQ(ParseByteSize("512M").value(), 512u << 20);
  EXPECT_EQ(ParseByteSize("4GiB").value(), uint64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("4 gb").value(), uint64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("2T").value(), uint64_t{2} << 40);
}

TEST(ParseByteSize, RejectsJunkWithAClearMessage) {
  for (const char* bad : {"", "GiB", "-1", "4XB", "1.5G", "4 G B", "99999999999999999999999"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("byte size"), std::string::npos);
  }
  EXPECT_FALSE(ParseByteSize("16777216T").ok());  // 2^64 bytes
}

TEST(FormatByteSize, PicksTheLargestUnit) {
  EXPECT_EQ(FormatByteSize(17), "17 B");
  EXPECT_EQ(FormatByteSize(64 << 10), "64 KiB");
  EXPECT_EQ(FormatByteSize(3 << 29), "1.5 GiB");
}

}  // namespace
}  // namespace kvpool
