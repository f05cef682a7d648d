#include "replay/token_content.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvpool::replay {
namespace {

TEST(TokenContentTest, PromptTokensShareExactlyTheSharedBlocks) {
  const trace::BlockIds first({1, 2, 3}), next({1, 2, 9});
  const auto a = PromptTokens(first, 64, 192, 7), b = PromptTokens(next, 64, 192, 7);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 128, b.begin()));
  EXPECT_FALSE(std::equal(a.begin() + 128, a.end(), b.begin() + 128));
  EXPECT_NE(PromptTokens(first, 64, 192, 8), a);  // another session shares nothing
  EXPECT_EQ(PromptTokens(first, 64, 150, 7).size(), 150u);  // a partial last block
}

// Real AgentX prompts end inside a block that has no id: its tokens depend on the session and
// their position only.
TEST(TokenContentTest, AnIdlessTailDependsOnTheSessionAndPositionOnly) {
  const trace::BlockIds two({1, 2}), other({1, 5});
  const auto a = PromptTokens(two, 64, 170, 7);  // 2 blocks + a 42-token tail
  ASSERT_EQ(a.size(), 170u);
  EXPECT_EQ(PromptTokens(two, 64, 150, 7), std::vector<connector::TokenId>(a.begin(), a.begin() + 150));
  const auto b = PromptTokens(other, 64, 170, 7);
  EXPECT_TRUE(std::equal(a.begin() + 128, a.end(), b.begin() + 128));  // same positions, same session
  const auto c = PromptTokens(two, 64, 170, 8);
  EXPECT_FALSE(std::equal(a.begin() + 128, a.end(), c.begin() + 128));  // another session
  EXPECT_NE(a[128], a[129]);
}

}  // namespace
}  // namespace kvpool::replay
