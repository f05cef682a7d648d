#include "master/eviction_lru.h"

#include <gtest/gtest.h>

#include <deque>

namespace kvpool::master {
namespace {

// Keys and group names live outside the order (in the index and the registry); the test keeps
// them in a deque so their addresses stay put.
class EvictionLruTest : public ::testing::Test {
 protected:
  const std::string* Name(const std::string& name) { return &names_.emplace_back(name); }

  EvictionLru::UnitId Add(const std::string& key, int64_t at_ms, int64_t pin_until_ms = 0,
                          int64_t blocked_until_ms = 0) {
    return lru_.AddObject(Name(key), /*put_id=*/1, at_ms, pin_until_ms, blocked_until_ms, now_);
  }

  // Names of the next `max` units in eviction order, given straight back.
  std::vector<std::string> Peek(size_t max = 100) {
    auto out = lru_.CheckOut(max, now_);
    std::vector<std::string> names;
    for (const auto& c : out) {
      names.push_back(c.name);
      lru_.GiveBack(c, 0, now_);
    }
    return names;
  }

  using Names = std::vector<std::string>;
  std::deque<std::string> names_;
  EvictionLru lru_;
  int64_t now_ = 1000;
};

TEST_F(EvictionLruTest, LeastRecentFirstAndATouchMakesMostRecent) {
  auto a = Add("a", 10);
  Add("b", 20);
  Add("c", 30);
  EXPECT_EQ(Peek(), (Names{"a", "b", "c"}));
  now_ = 40;
  lru_.Touch(a, now_);
  EXPECT_EQ(Peek(), (Names{"b", "c", "a"}));
}

TEST_F(EvictionLruTest, AUnitReadManyTimesIsRankedAgainOnce) {
  auto a = Add("a", 10);
  Add("b", 20);
  for (int64_t t = 30; t < 40; ++t) lru_.Touch(a, t);
  const uint64_t before = lru_.reranked_total();
  EXPECT_EQ(Peek(), (Names{"b", "a"}));
  EXPECT_EQ(lru_.reranked_total() - before, 1u);
}

TEST_F(EvictionLruTest, AnOlderUnitAddedLaterIsRankedByItsTime) {
  Add("new", 50);
  Add("old", 5);  // a rejoined object that completed long ago
  EXPECT_EQ(Peek(), (Names{"old", "new"}));
}

TEST_F(EvictionLruTest, PinnedUnitsComeAfterUnpinnedUntilThePinEnds) {
  Add("pinned", 10, /*pin_until_ms=*/2000);
  Add("a", 20);
  EXPECT_EQ(Peek(), (Names{"a", "pinned"}));
  now_ = 2000;  // the pin ends: plain LRU, and it is the older
  EXPECT_EQ(Peek(), (Names{"pinned", "a"}));
}

TEST_F(EvictionLruTest, DeferredUnitIsHiddenUntilItsTimeThenBackInPlace) {
  Add("leased", 10);
  Add("a", 20);
  auto first = lru_.CheckOut(1, now_);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].name, "leased");
  lru_.GiveBack(first[0], /*blocked_until_ms=*/1500, now_);
  EXPECT_EQ(Peek(), (Names{"a"}));
  now_ = 1500;
  EXPECT_EQ(Peek(), (Names{"leased", "a"}));
}

TEST_F(EvictionLruTest, AddedBlockedUnitWaitsForItsTime) {
  Add("rejoined", 10, 0, /*blocked_until_ms=*/5000);
  EXPECT_TRUE(Peek().empty());
  EXPECT_EQ(lru_.unit_count(), 1u);
  now_ = 5000;
  EXPECT_EQ(Peek(), (Names{"rejoined"}));
}

TEST_F(EvictionLruTest, GroupIsOneUnitAsRecentAsItsLatestMember) {
  const std::string* g = Name("g");
  auto u0 = lru_.JoinGroup(g, 10, 0, 0, now_);
  auto u1 = lru_.JoinGroup(g, 30, 0, 0, now_);
  EXPECT_EQ(u0, u1);
  Add("single", 20);
  EXPECT_EQ(Peek(), (Names{"single", "g"}));
  auto out = lru_.CheckOut(2, now_);
  EXPECT_TRUE(out[1].is_group);
  for (const auto& c : out) lru_.GiveBack(c, 0, now_);
  lru_.Leave(u0, 0, now_);
  EXPECT_EQ(lru_.unit_count(), 2u);
  lru_.Leave(u1, 0, now_);
  EXPECT_EQ(lru_.unit_count(), 1u);
  EXPECT_EQ(Peek(), (Names{"single"}));
}

TEST_F(EvictionLruTest, GroupIsPinnedOnlyWhileAPinnedMemberIsIn) {
  const std::string* g = Name("g");
  auto unit = lru_.JoinGroup(g, 10, /*pin_until_ms=*/9000, 0, now_);
  lru_.JoinGroup(g, 10, 0, 0, now_);
  Add("a", 20);
  EXPECT_EQ(Peek(), (Names{"a", "g"}));
  lru_.Leave(unit, 9000, now_);  // the pinned member is removed
  EXPECT_EQ(Peek(), (Names{"g", "a"}));
}

// A retained unit (a waiting session's chunk) comes after every unit without a pin until its
// retention ends, and a group keeps it while members come and go.
TEST_F(EvictionLruTest, ARetainedUnitComesAfterUnpinnedOnesUntilItsRetentionEnds) {
  const std::string* g = Name("g");
  auto group = lru_.JoinGroup(g, 10, 0, 0, now_);
  auto a = Add("a", 5);
  Add("b", 20);
  ASSERT_TRUE(lru_.Retain(group, now_ + 500, now_ + 500, 10, now_));
  ASSERT_TRUE(lru_.Retain(a, now_ + 100, now_ + 100, 10, now_));
  EXPECT_EQ(lru_.retained_units(), 2u);
  EXPECT_EQ(Peek(), (Names{"b", "g", "a"}));  // retained ones expected last first
  lru_.JoinGroup(g, 30, 0, 0, now_);           // a member joins: still retained
  EXPECT_EQ(Peek(), (Names{"b", "g", "a"}));
  now_ += 100;                                 // a's retention ends: unpinned, by its recency
  EXPECT_EQ(Peek(), (Names{"a", "b", "g"}));
  EXPECT_EQ(lru_.retained_units(), 1u);
  ASSERT_TRUE(lru_.Retain(group, now_ + 1000, now_ + 1000, 10, now_));  // moved later: still one
  EXPECT_EQ(lru_.retained_units(), 1u);
  now_ += 500;
  EXPECT_EQ(Peek(), (Names{"a", "b", "g"}));
  now_ += 500;
  EXPECT_EQ(Peek(), (Names{"a", "b", "g"}));
  EXPECT_EQ(lru_.retained_units(), 0u);
  lru_.Leave(a, 0, now_);
  EXPECT_EQ(Peek(), (Names{"b", "g"}));
}

// No more than the bound are retained at once; a unit that leaves frees its place.
TEST_F(EvictionLruTest, RetentionIsBoundedAndFreedByUnitsThatLeave) {
  auto a = Add("a", 10);
  auto b = Add("b", 20);
  auto c = Add("c", 30);
  EXPECT_TRUE(lru_.Retain(a, now_ + 100, now_ + 100, 2, now_));
  EXPECT_TRUE(lru_.Retain(b, now_ + 100, now_ + 100, 2, now_));
  EXPECT_FALSE(lru_.Retain(c, now_ + 100, now_ + 100, 2, now_));  // expected no sooner
  EXPECT_EQ(Peek(), (Names{"c", "a", "b"}));
  lru_.Leave(a, 0, now_);
  EXPECT_EQ(lru_.retained_units(), 1u);
  EXPECT_TRUE(lru_.Retain(c, now_ + 100, now_ + 100, 2, now_));
  EXPECT_EQ(lru_.displaced_retentions(), 0u);
}

// Among retained units the one expected to be read last goes first (a session that has just
// ended its turn before one whose turn is queued), whatever their recency, and at the bound a
// retention expected sooner takes the place of the one expected last, which is plain LRU again.
TEST_F(EvictionLruTest, RetainedUnitsGoFarthestExpectedReuseFirstAndASoonerOneTakesTheFarthestsPlace) {
  auto queued = Add("queued", 10);
  auto waiting = Add("waiting", 20);
  auto just_served = Add("just-served", 30);
  auto arrived = Add("arrived", 5);
  Add("pinned", 1, /*pin_until_ms=*/9000);
  ASSERT_TRUE(lru_.Retain(queued, now_ + 600, now_, 3, now_));
  ASSERT_TRUE(lru_.Retain(waiting, now_ + 600, now_ + 100, 3, now_));
  ASSERT_TRUE(lru_.Retain(just_served, now_ + 600, now_ + 300, 3, now_));
  EXPECT_EQ(Peek(), (Names{"arrived", "just-served", "waiting", "queued", "pinned"}));
  lru_.Touch(just_served, now_ + 1);  // a read does not change what the router expects
  EXPECT_EQ(Peek(), (Names{"arrived", "just-served", "waiting", "queued", "pinned"}));
  // Full: expected later than every retained unit, refused; sooner, it displaces the farthest.
  EXPECT_FALSE(lru_.Retain(arrived, now_ + 600, now_ + 400, 3, now_));
  ASSERT_TRUE(lru_.Retain(arrived, now_ + 600, now_ + 50, 3, now_));
  EXPECT_EQ(lru_.retained_units(), 3u);
  EXPECT_EQ(lru_.displaced_retentions(), 1u);
  EXPECT_EQ(Peek(), (Names{"just-served", "waiting", "arrived", "queued", "pinned"}));
  // A retained unit's expectation moves with its next Retain.
  ASSERT_TRUE(lru_.Retain(queued, now_ + 600, now_ + 200, 3, now_));
  EXPECT_EQ(Peek(), (Names{"just-served", "queued", "waiting", "arrived", "pinned"}));
}

// A released unit (an ended session's chunk) goes first, pinned or not, until it is used again.
TEST_F(EvictionLruTest, AReleasedUnitIsFirstToEvictUntilUsedAgain) {
  Add("a", 10);
  auto b = Add("b", 20);
  auto c = Add("c", 30, /*pin_until_ms=*/9000);
  ASSERT_TRUE(lru_.Retain(b, now_ + 100, now_ + 100, 10, now_));
  lru_.Release(b, now_);
  EXPECT_EQ(lru_.retained_units(), 0u);
  EXPECT_EQ(Peek(), (Names{"b", "a", "c"}));
  lru_.Release(c, now_);  // its put's own pin stands: first of the pinned
  Add("d", 40, 9000);
  EXPECT_EQ(Peek(), (Names{"b", "a", "c", "d"}));
  now_ += 10;
  lru_.Touch(b, now_);
  EXPECT_EQ(Peek(), (Names{"a", "b", "c", "d"}));
}

TEST_F(EvictionLruTest, GiveBackOfAUnitThatEndedIsANoOp) {
  auto a = Add("a", 10);
  auto out = lru_.CheckOut(1, now_);
  ASSERT_EQ(out.size(), 1u);
  lru_.Leave(a, 0, now_);  // removed while the pass held it
  Add("b", 20);            // may reuse the unit id
  lru_.GiveBack(out[0], 0, now_);
  EXPECT_EQ(Peek(), (Names{"b"}));
  EXPECT_EQ(lru_.unit_count(), 1u);
}

TEST_F(EvictionLruTest, CheckOutCountsWhatItHandsOut) {
  for (int i = 0; i < 1000; ++i) Add("k" + std::to_string(i), i);
  const uint64_t before = lru_.checked_out_total();
  auto out = lru_.CheckOut(3, now_);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].name, "k0");
  EXPECT_EQ(lru_.checked_out_total() - before, 3u);
  for (const auto& c : out) lru_.GiveBack(c, 0, now_);
}

}  // namespace
}  // namespace kvpool::master
