// TierFile against real files: many requests in flight round-trip their bytes; a bad request
// fails alone; the bytes survive a reopen; a filesystem too small is NO_SPACE at Open (a real
// 1 MiB tmpfs, where the machine lets the test mount one); a filesystem of the page cache
// (tmpfs) works too.
#include "ssd/tier_file.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <thread>

namespace kvpool::ssd {
namespace {

namespace fs = std::filesystem;

// Page-aligned bytes, as O_DIRECT wants them.
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : size(n), data(static_cast<std::byte*>(std::aligned_alloc(4096, n))) {}
  ~AlignedBytes() { std::free(data); }
  std::span<std::byte> span(size_t offset, size_t n) const { return {data + offset, n}; }
  size_t size;
  std::byte* data;
};

class TierFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvpool-tier-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

void Fill(AlignedBytes& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < b.size; i += 8) {
    const uint64_t v = rng();
    std::memcpy(b.data + i, &v, std::min<size_t>(8, b.size - i));
  }
}

TEST_F(TierFileTest, ManyRequestsInFlightRoundTripTheirBytes) {
  constexpr uint64_t kPiece = 64 << 10, kPieces = 64;
  auto file = TierFile::Open(dir_ / "tier", 2 * kPiece * kPieces, {.queue_depth = 8});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  AlignedBytes out(kPiece * kPieces), in(kPiece * kPieces);
  Fill(out, 1);
  // Every piece to a distinct slot of the file, in shuffled order.
  std::vector<uint64_t> slots(2 * kPieces);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(2));
  std::vector<FileIo> writes, reads;
  for (uint64_t p = 0; p < kPieces; ++p) {
    writes.push_back({FileIo::kWrite, slots[p] * kPiece, out.span(p * kPiece, kPiece)});
    reads.push_back({FileIo::kRead, slots[p] * kPiece, in.span(p * kPiece, kPiece)});
  }
  for (const Status& s : (*file)->Run(writes)) ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Status& s : (*file)->Run(reads)) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(0, std::memcmp(out.data, in.data, out.size));
}

TEST_F(TierFileTest, ABadRequestFailsAloneAndTheRestRun) {
  auto file = TierFile::Open(dir_ / "tier", 1 << 20, {});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  AlignedBytes bytes(3 * 4096 + 4096);
  Fill(bytes, 3);
  std::vector<FileIo> writes = {
      {FileIo::kWrite, 0, bytes.span(0, 4096)},
      {FileIo::kWrite, (1 << 20) - 4096, bytes.span(4096, 8192)},  // runs past the end
      {FileIo::kWrite, 8192, bytes.span(8192, 4096)},
  };
  if ((*file)->direct()) writes.push_back({FileIo::kWrite, 100, bytes.span(0, 4096)});  // misaligned
  const std::vector<Status> done = (*file)->Run(writes);
  EXPECT_TRUE(done[0].ok()) << done[0].ToString();
  EXPECT_EQ(done[1].code(), StatusCode::kInvalidArgument);
  EXPECT_NE(done[1].message().find("outside the file"), std::string::npos) << done[1].ToString();
  EXPECT_TRUE(done[2].ok()) << done[2].ToString();
  if ((*file)->direct()) {
    EXPECT_EQ(done[3].code(), StatusCode::kInvalidArgument);
    EXPECT_NE(done[3].message().find("aligned"), std::string::npos) << done[3].ToString();
  }
  AlignedBytes back(4096);
  ASSERT_TRUE((*file)->Run(std::vector<FileIo>{{FileIo::kRead, 8192, back.span(0, 4096)}})[0].ok());
  EXPECT_EQ(0, std::memcmp(back.data, bytes.data + 8192, 4096));
}

TEST_F(TierFileTest, BytesSurviveAReopen) {
  AlignedBytes out(1 << 20), in(1 << 20);
  Fill(out, 4);
  {
    auto file = TierFile::Open(dir_ / "tier", 4 << 20, {});
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_TRUE((*file)->Run(std::vector<FileIo>{{FileIo::kWrite, 2 << 20, out.span(0, out.size)}})[0].ok());
  }
  auto file = TierFile::Open(dir_ / "tier", 4 << 20, {});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)->Run(std::vector<FileIo>{{FileIo::kRead, 2 << 20, in.span(0, in.size)}})[0].ok());
  EXPECT_EQ(0, std::memcmp(out.data, in.data, out.size));
}

TEST_F(TierFileTest, ThreadsTakeTurnsOnOneFile) {
  constexpr uint64_t kPiece = 16 << 10, kPieces = 16, kThreads = 4;
  auto file = TierFile::Open(dir_ / "tier", kThreads * kPieces * kPiece, {.queue_depth = 4});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<std::thread> threads;
  std::vector<int> matched(kThreads, 0);
  for (uint64_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      AlignedBytes out(kPieces * kPiece), in(kPieces * kPiece);
      Fill(out, 10 + t);
      std::vector<FileIo> writes, reads;
      for (uint64_t p = 0; p < kPieces; ++p) {
        const uint64_t at = (p * kThreads + t) * kPiece;  // the threads' pieces interleave
        writes.push_back({FileIo::kWrite, at, out.span(p * kPiece, kPiece)});
        reads.push_back({FileIo::kRead, at, in.span(p * kPiece, kPiece)});
      }
      bool ok = true;
      for (const Status& s : (*file)->Run(writes)) ok = ok && s.ok();
      for (const Status& s : (*file)->Run(reads)) ok = ok && s.ok();
      matched[t] = ok && std::memcmp(out.data, in.data, out.size) == 0;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(matched, std::vector<int>(kThreads, 1));
}

TEST_F(TierFileTest, BadArgumentsAndPathsAreClearErrors) {
  EXPECT_EQ(TierFile::Open(dir_ / "tier", 1000, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TierFile::Open(dir_ / "tier", 4096, {.queue_depth = 0}).status().code(), StatusCode::kInvalidArgument);
  const auto missing = TierFile::Open(dir_ / "no-such-dir" / "tier", 4096, {});
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("no-such-dir"), std::string::npos) << missing.status().ToString();
}

TEST_F(TierFileTest, AFilesystemTooSmallIsNoSpaceAtOpen) {
  const fs::path mnt = dir_ / "small";
  fs::create_directories(mnt);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1m") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  struct Unmount {
    const fs::path& at;
    ~Unmount() { umount(at.c_str()); }
  } unmount{mnt};
  {
    const auto big = TierFile::Open(mnt / "tier", 4 << 20, {});
    EXPECT_EQ(big.status().code(), StatusCode::kNoSpace) << big.status().ToString();
    // A tier that fits works on the same (page cache) filesystem.
    auto fits = TierFile::Open(mnt / "tier2", 256 << 10, {});
    ASSERT_TRUE(fits.ok()) << fits.status().ToString();
    AlignedBytes out(64 << 10), in(64 << 10);
    Fill(out, 5);
    ASSERT_TRUE((*fits)->Run(std::vector<FileIo>{{FileIo::kWrite, 64 << 10, out.span(0, out.size)}})[0].ok());
    ASSERT_TRUE((*fits)->Run(std::vector<FileIo>{{FileIo::kRead, 64 << 10, in.span(0, in.size)}})[0].ok());
    EXPECT_EQ(0, std::memcmp(out.data, in.data, out.size));
  }
}

}  // namespace
}  // namespace kvpool::ssd
