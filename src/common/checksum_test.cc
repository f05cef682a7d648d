#include "common/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

namespace kvpool {
namespace {

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

// The vector unit chosen at run time must not change the hash: it is xxh3-64 as the portable
// code computes it, at every length class xxh3 treats differently.
TEST(ChecksumTest, IsXxh3OfTheBytes) {
  for (size_t n : {0, 1, 3, 16, 17, 128, 129, 240, 241, 1024, 4096, 65537, 3 << 20}) {
    const auto bytes = RandomBytes(n, static_cast<uint32_t>(n));
    EXPECT_EQ(Checksum(bytes), XXH3_64bits(bytes.data(), bytes.size())) << n << " bytes";
  }
}

TEST(ChecksumTest, OneFlippedBitChangesIt) {
  auto bytes = RandomBytes(1 << 20, 7);
  const uint64_t good = Checksum(bytes);
  for (size_t pos : {size_t{0}, size_t{4095}, size_t{1} << 19, (size_t{1} << 20) - 1}) {
    for (int bit : {0, 7}) {
      bytes[pos] ^= std::byte{static_cast<unsigned char>(1u << bit)};
      EXPECT_NE(Checksum(bytes), good) << "byte " << pos << " bit " << bit;
      bytes[pos] ^= std::byte{static_cast<unsigned char>(1u << bit)};
    }
  }
  EXPECT_EQ(Checksum(bytes), good);
}

// Fed in pieces of any size, the stream gives the checksum of the whole; so does the copy.
TEST(ChecksumTest, StreamAndCopyEqualTheWholeValuesChecksum) {
  std::mt19937 rng(11);
  for (size_t n : {0, 1, 240, 241, 65536, 65537, 3 << 20}) {
    const auto bytes = RandomBytes(n, static_cast<uint32_t>(n) + 1);
    ChecksumStream stream;
    for (size_t done = 0; done < n;) {
      const size_t piece = std::min<size_t>(n - done, 1 + rng() % 200000);
      stream.Update(bytes.data() + done, piece);
      done += piece;
    }
    EXPECT_EQ(stream.Digest(), Checksum(bytes)) << n << " bytes";
    std::vector<std::byte> copy(n);
    EXPECT_EQ(CopyWithChecksum(copy.data(), bytes.data(), n), Checksum(bytes)) << n << " bytes";
    EXPECT_EQ(copy, bytes);
  }
}

// A batch hashed on helper threads gives each value's own checksum, also with several callers
// sharing the helpers at once.
TEST(ChecksumTest, ChecksumAllMatchesOneByOne) {
  HelperPool pool(3);
  std::vector<std::vector<std::byte>> values;
  for (uint32_t i = 0; i < 40; ++i) values.push_back(RandomBytes((i * 7919) % 70000, i));
  std::vector<std::span<const std::byte>> views(values.begin(), values.end());
  std::vector<std::thread> callers;
  std::vector<std::vector<uint64_t>> outs(4, std::vector<uint64_t>(values.size()));
  for (auto& out : outs) callers.emplace_back([&] { ChecksumAll(pool, views, out); });
  for (auto& t : callers) t.join();
  for (const auto& out : outs) {
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], Checksum(values[i])) << i;
  }
  HelperPool none(0);  // the caller alone
  std::vector<uint64_t> alone(values.size());
  ChecksumAll(none, views, alone);
  EXPECT_EQ(alone, outs[0]);
}

}  // namespace
}  // namespace kvpool
