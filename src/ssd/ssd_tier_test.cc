// SsdTier on real files: values round-trip; a group is evicted whole, least recently used
// first; bytes changed on the file are caught (CORRUPT, dropped), never returned; a reopened
// tier finds what it held and not what was removed or replaced, and a group only whole.
#include "ssd/ssd_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <variant>

namespace kvpool::ssd {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kSlot = 64 << 10;

std::vector<std::byte> Value(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937_64 rng(seed);
  for (std::byte& b : v) b = std::byte(rng());
  return v;
}

class SsdTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvpool-ssdtier-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<SsdTier> Open(uint64_t slots) {
    auto tier = SsdTier::Open(dir_ / "tier", slots * kSlot, {.slot_bytes = kSlot, .file = {}});
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }
  // The value of `key` read back, or the error's code.
  static std::variant<std::vector<std::byte>, StatusCode> Read(SsdTier& tier, const std::string& key) {
    std::vector<std::byte> out(kSlot);
    Result<uint64_t> n = tier.Get(key, out);
    if (!n.ok()) return n.status().code();
    out.resize(*n);
    return out;
  }
  fs::path dir_;
};

TEST_F(SsdTierTest, ValuesRoundTripAndRemoveForgets) {
  auto tier = Open(8);
  const auto a = Value(1000, 1), b = Value(kSlot - SsdTier::kHeaderBytes, 2);
  ASSERT_TRUE(tier->Put("a", "", a).ok());
  ASSERT_TRUE(tier->Put("b", "", b).ok());
  EXPECT_EQ(std::get<0>(Read(*tier, "a")), a);
  EXPECT_EQ(std::get<0>(Read(*tier, "b")), b);
  ASSERT_TRUE(tier->Remove("a").ok());
  EXPECT_EQ(std::get<1>(Read(*tier, "a")), StatusCode::kNotFound);
  EXPECT_EQ(tier->Remove("a").code(), StatusCode::kNotFound);
  EXPECT_EQ(tier->Put("big", "", Value(kSlot, 3)).code(), StatusCode::kInvalidArgument);
  std::vector<std::byte> small(10);
  EXPECT_EQ(tier->Get("b", small).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tier->stats().objects, 1u);
  EXPECT_EQ(tier->stats().value_bytes, b.size());
}

TEST_F(SsdTierTest, BatchesOfMoreObjectsThanBuffersAnswerEachObject) {
  auto tier = Open(64);  // 8 in flight, through 8 buffers
  std::vector<std::vector<std::byte>> values;
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    values.push_back(Value(1000 + 37 * i, 100 + i));
    keys.push_back("obj" + std::to_string(i));
  }
  std::vector<SsdPut> puts;
  for (int i = 0; i < 40; ++i) puts.push_back({keys[i], i % 2 ? "odd" : "", values[i]});
  puts.push_back({"", "", values[0]});  // no key
  const std::vector<Status> put = tier->Put(puts);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(put[i].ok()) << i << ": " << put[i].ToString();
  EXPECT_EQ(put[40].code(), StatusCode::kInvalidArgument);

  std::vector<std::vector<std::byte>> outs(42, std::vector<std::byte>(kSlot));
  std::vector<SsdGet> gets;
  for (int i = 0; i < 40; ++i) gets.push_back({keys[i], outs[i]});
  gets.push_back({"missing", outs[40]});
  gets.push_back({keys[5], std::span(outs[41]).first(10)});  // too short
  const std::vector<Result<uint64_t>> got = tier->Get(gets);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(std::vector<std::byte>(outs[i].begin(), outs[i].begin() + *got[i]), values[i]) << i;
  }
  EXPECT_EQ(got[40].status().code(), StatusCode::kNotFound);
  EXPECT_EQ(got[41].status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SsdTierTest, AGroupIsEvictedWholeLeastRecentlyUsedFirst) {
  auto tier = Open(4);
  for (const char* key : {"a/0", "a/1"}) ASSERT_TRUE(tier->Put(key, "a", Value(100, 1)).ok());
  for (const char* key : {"b/0", "b/1"}) ASSERT_TRUE(tier->Put(key, "b", Value(100, 2)).ok());
  ASSERT_EQ(tier->stats().objects, 4u);
  ASSERT_TRUE(std::holds_alternative<std::vector<std::byte>>(Read(*tier, "a/0")));  // a is now the most recent
  ASSERT_TRUE(tier->Put("c", "", Value(100, 3)).ok());
  EXPECT_TRUE(tier->Contains("a/0"));
  EXPECT_TRUE(tier->Contains("a/1"));
  EXPECT_FALSE(tier->Contains("b/0"));  // b went whole, though one slot was enough
  EXPECT_FALSE(tier->Contains("b/1"));
  EXPECT_TRUE(tier->Contains("c"));
  EXPECT_EQ(tier->stats().evicted_objects, 2u);
}

// A value read from the file by someone else (a client sent there by the master): its offset
// is where the value lies, and MarkUsed makes its group the most recent, as a Get would.
TEST_F(SsdTierTest, ValueOffsetsPointAtTheValueAndMarkUsedKeepsItsGroup) {
  auto tier = Open(4);
  const auto a = Value(100, 1);
  for (const char* key : {"a/0", "a/1"}) ASSERT_TRUE(tier->Put(key, "a", a).ok());
  for (const char* key : {"b/0", "b/1"}) ASSERT_TRUE(tier->Put(key, "b", Value(100, 2)).ok());
  const auto at = tier->ValueOffset("a/1");
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at % kSlot, SsdTier::kHeaderBytes);
  std::vector<std::byte> raw(a.size());
  const int fd = ::open((dir_ / "tier").c_str(), O_RDONLY);
  ASSERT_EQ(::pread(fd, raw.data(), raw.size(), static_cast<off_t>(*at)), static_cast<ssize_t>(raw.size()));
  ::close(fd);
  EXPECT_EQ(raw, a);
  EXPECT_FALSE(tier->ValueOffset("absent").has_value());
  tier->MarkUsed("a/1");
  ASSERT_TRUE(tier->Put("c", "", Value(100, 3)).ok());
  EXPECT_TRUE(tier->Contains("a/0"));
  EXPECT_FALSE(tier->Contains("b/0"));
}

TEST_F(SsdTierTest, BytesChangedOnTheFileAreCaughtAndDropped) {
  auto tier = Open(4);
  ASSERT_TRUE(tier->Put("x", "", Value(5000, 4)).ok());
  ASSERT_TRUE(tier->Put("y", "", Value(5000, 5)).ok());
  // Flip a bit of every slot's value through another descriptor (what a failing disk does).
  const int fd = open((dir_ / "tier").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  for (uint64_t slot = 0; slot < 4; ++slot) {
    std::byte b;
    ASSERT_EQ(pread(fd, &b, 1, slot * kSlot + SsdTier::kHeaderBytes + 17), 1);
    b ^= std::byte{0x04};
    ASSERT_EQ(pwrite(fd, &b, 1, slot * kSlot + SsdTier::kHeaderBytes + 17), 1);
  }
  close(fd);
  EXPECT_EQ(std::get<1>(Read(*tier, "x")), StatusCode::kCorrupt);
  EXPECT_FALSE(tier->Contains("x"));
  EXPECT_EQ(std::get<1>(Read(*tier, "x")), StatusCode::kNotFound);
  EXPECT_EQ(tier->stats().corrupt, 1u);
  // Nor does a restart bring a dropped object back.
  tier.reset();
  tier = Open(4);
  EXPECT_FALSE(tier->Contains("x"));
  EXPECT_EQ(std::get<1>(Read(*tier, "y")), StatusCode::kCorrupt);
}

TEST_F(SsdTierTest, AReopenedTierFindsWhatItHeldAndNotWhatWasRemovedOrReplaced) {
  const auto keep = Value(3000, 6), newer = Value(2000, 7);
  {
    auto tier = Open(8);
    ASSERT_TRUE(tier->Put("keep", "g", keep).ok());
    ASSERT_TRUE(tier->Put("gone", "", Value(100, 8)).ok());
    ASSERT_TRUE(tier->Put("twice", "", Value(100, 9)).ok());
    ASSERT_TRUE(tier->Put("twice", "", newer).ok());
    ASSERT_TRUE(tier->Remove("gone").ok());
  }
  auto tier = Open(8);
  std::vector<std::string> keys = tier->Keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"keep", "twice"}));
  EXPECT_EQ(tier->stats().restored_objects, 2u);
  EXPECT_EQ(std::get<0>(Read(*tier, "keep")), keep);
  EXPECT_EQ(std::get<0>(Read(*tier, "twice")), newer);
  // The restored tier keeps putting and evicting: 6 free slots, then the oldest unit goes.
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(tier->Put("n" + std::to_string(i), "", Value(100, i)).ok());
  EXPECT_FALSE(tier->Contains("keep"));  // put before "twice", so evicted first
  EXPECT_TRUE(tier->Contains("twice"));
}

TEST_F(SsdTierTest, AfterACrashBetweenAReplaceAndItsCleanUpTheNewestCopyWins) {
  const auto older = Value(500, 10), newer = Value(700, 11);
  std::vector<char> first_slot(kSlot);
  {
    auto tier = Open(4);
    ASSERT_TRUE(tier->Put("k", "", older).ok());  // slot 0
    const int fd = open((dir_ / "tier").c_str(), O_RDONLY);
    ASSERT_EQ(pread(fd, first_slot.data(), kSlot, 0), static_cast<ssize_t>(kSlot));
    close(fd);
    ASSERT_TRUE(tier->Put("k", "", newer).ok());  // slot 1; slot 0's header cleared
  }
  // Put the old copy back, as if the process died before clearing it.
  const int fd = open((dir_ / "tier").c_str(), O_WRONLY);
  ASSERT_EQ(pwrite(fd, first_slot.data(), kSlot, 0), static_cast<ssize_t>(kSlot));
  close(fd);
  for (int restart = 0; restart < 2; ++restart) {
    auto tier = Open(4);
    EXPECT_EQ(tier->Keys(), std::vector<std::string>{"k"});
    EXPECT_EQ(std::get<0>(Read(*tier, "k")), newer);
  }
}

// A crash mid-way through a group's demotion leaves part of it on the file: a reopened tier
// keeps a group only when every object its headers count is there.
TEST_F(SsdTierTest, AReopenedTierKeepsAGroupOnlyWhole) {
  const auto a = Value(100, 20), b = Value(100, 21), c = Value(100, 22);
  {
    auto tier = Open(8);
    const SsdPut cut[] = {{.key = "cut/0", .group = "cut", .value = a, .group_members = 3},
                          {.key = "cut/1", .group = "cut", .value = b, .group_members = 3}};
    for (const Status& s : tier->Put(cut)) ASSERT_TRUE(s.ok()) << s.ToString();
    // A group demoted in two goes (its first two objects, then a third added later) is whole.
    const SsdPut first[] = {{.key = "two/0", .group = "two", .value = a, .group_members = 2},
                            {.key = "two/1", .group = "two", .value = b, .group_members = 2}};
    for (const Status& s : tier->Put(first)) ASSERT_TRUE(s.ok()) << s.ToString();
    const SsdPut later[] = {{.key = "two/2", .group = "two", .value = c, .group_members = 3}};
    for (const Status& s : tier->Put(later)) ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(tier->Put("alone", "", c).ok());
  }
  for (int restart = 0; restart < 2; ++restart) {  // the second finds the cleared headers cleared
    auto tier = Open(8);
    std::vector<std::string> keys = tier->Keys();
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"alone", "two/0", "two/1", "two/2"}));
    EXPECT_EQ(tier->stats().incomplete_dropped, restart == 0 ? 2u : 0u);
    EXPECT_EQ(std::get<0>(Read(*tier, "two/2")), c);
    EXPECT_EQ(std::get<1>(Read(*tier, "cut/0")), StatusCode::kNotFound);
  }
}

}  // namespace
}  // namespace kvpool::ssd
