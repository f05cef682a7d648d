// The GPU's way of computing XXH3-64 (xxh3_steps.h: block sums in any order, then a chain of
// scrambles per lane), run on the CPU and compared with the library's Checksum() bit for bit:
// every length class, every length up to a few blocks, block edges, a real stage object, and
// inputs that start at odd addresses.
#include "connector/xxh3_steps.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/checksum.h"

namespace kvpool::connector::xxh3 {
namespace {

// The steps in the order the GPU runs them: every block's sums first, then the chains.
uint64_t HashInSteps(const unsigned char* in, uint64_t length) {
  const Secret& s = kDefaultSecret;
  if (length <= kMaxShortBytes) return HashShort(in, length, s);
  const uint64_t blocks = FullBlocks(length);
  std::vector<uint64_t> sums((blocks + 1) * kLanes);
  for (uint64_t b = blocks + 1; b-- > 0;) {  // any order: reversed here
    for (unsigned l = 0; l < kLanes; ++l) {
      sums[b * kLanes + l] = b < blocks ? BlockSum(in + b * kBlockBytes, kBlockBytes / kStripeBytes, l, s)
                                        : TailSum(in, length, l, s);
    }
  }
  uint64_t lanes[kLanes];
  for (unsigned l = 0; l < kLanes; ++l) {
    lanes[l] = Initial(l);
    for (uint64_t b = 0; b < blocks; ++b) lanes[l] = Scramble(lanes[l] + sums[b * kLanes + l], l, s);
    lanes[l] += sums[blocks * kLanes + l];
  }
  return MergeLanes(lanes, length, s);
}

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> bytes(n);
  std::mt19937_64 rng(seed);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

TEST(Xxh3StepsTest, EqualTheLibraryForEveryLengthUpToFourBlocks) {
  const std::vector<unsigned char> bytes = RandomBytes(4 * kBlockBytes + 200, 1);
  for (size_t n = 0; n <= bytes.size(); ++n) {
    ASSERT_EQ(HashInSteps(bytes.data(), n), Checksum(bytes.data(), n)) << n << " bytes";
  }
}

TEST(Xxh3StepsTest, EqualTheLibraryAtBlockEdgesAndForAStageObject) {
  // 3,194,880 B: 256 tokens x 20 layers x 624 B, restore_bench's object.
  for (uint64_t n : {uint64_t{1} << 20, (uint64_t{1} << 20) + 1, (uint64_t{1} << 20) - 1, uint64_t{1} << 20 | 64,
                     uint64_t{3194880}, uint64_t{5000003}}) {
    const std::vector<unsigned char> bytes = RandomBytes(n, n);
    EXPECT_EQ(HashInSteps(bytes.data(), n), Checksum(bytes.data(), n)) << n << " bytes";
  }
}

TEST(Xxh3StepsTest, EqualTheLibraryFromUnalignedStarts) {
  const std::vector<unsigned char> bytes = RandomBytes(3 * kBlockBytes + 8, 7);
  for (size_t offset = 1; offset < 8; ++offset) {
    for (size_t n : {size_t{0}, size_t{3}, size_t{7}, size_t{15}, size_t{100}, size_t{200}, size_t{241},
                     size_t{kBlockBytes + 1}, size_t{3 * kBlockBytes}}) {
      EXPECT_EQ(HashInSteps(bytes.data() + offset, n), Checksum(bytes.data() + offset, n))
          << n << " bytes at offset " << offset;
    }
  }
}

TEST(Xxh3StepsTest, AFlippedBitChangesTheHash) {
  std::vector<unsigned char> bytes = RandomBytes(5 * kBlockBytes + 17, 3);
  const uint64_t good = HashInSteps(bytes.data(), bytes.size());
  for (size_t pos : {size_t{0}, size_t{1023}, size_t{1024}, bytes.size() - 65, bytes.size() - 1}) {
    bytes[pos] ^= 0x10;
    EXPECT_NE(HashInSteps(bytes.data(), bytes.size()), good) << "byte " << pos;
    bytes[pos] ^= 0x10;
  }
}

}  // namespace
}  // namespace kvpool::connector::xxh3
