#include "store/segment_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace kvpool::store {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

SegmentMemoryOptions Options(uint64_t size) {
  SegmentMemoryOptions o;
  o.size_bytes = size;
  return o;
}

// Bytes of the memfd the kernel has actually allocated: proves pages were faulted in.
uint64_t AllocatedBytes(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

uint64_t FreeHugePages2M() {
  uint64_t free_pages = 0, reserved = 0;
  std::ifstream("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") >> free_pages;
  std::ifstream("/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages") >> reserved;
  return free_pages > reserved ? free_pages - reserved : 0;
}

std::string ShmemThpSetting() {
  std::string s;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/shmem_enabled"), s);
  return s;
}

TEST(SegmentMemoryTest, AllocatesAndPrefaultsEveryPage) {
  auto seg = SegmentMemory::Allocate(Options(64 * kMiB));
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_NE((*seg)->base(), nullptr);
  EXPECT_EQ((*seg)->size(), 64 * kMiB);
  EXPECT_EQ((*seg)->mapped_size(), 64 * kMiB);
  EXPECT_GE((*seg)->fd(), 0);
  EXPECT_EQ(AllocatedBytes((*seg)->fd()), 64 * kMiB);
  EXPECT_GT((*seg)->prefault_time().count(), 0);
  EXPECT_NE((*seg)->prefault_method(), PrefaultMethod::kAuto);  // reports the one it used
  EXPECT_FALSE((*seg)->Describe().empty());
}

TEST(SegmentMemoryTest, EveryPrefaultMethodFaultsEverything) {
  for (auto method : {PrefaultMethod::kPopulateWrite, PrefaultMethod::kTouch,
                      PrefaultMethod::kMapPopulate}) {
    SegmentMemoryOptions o = Options(8 * kMiB);
    o.prefault = method;
    o.prefault_threads = 2;
    auto seg = SegmentMemory::Allocate(o);
    ASSERT_TRUE(seg.ok()) << PrefaultMethodName(method) << ": " << seg.status().ToString();
    EXPECT_EQ((*seg)->prefault_method(), method);
    EXPECT_EQ(AllocatedBytes((*seg)->fd()), 8 * kMiB) << PrefaultMethodName(method);
  }
}

TEST(SegmentMemoryTest, NoPrefaultLeavesPagesUnallocated) {
  SegmentMemoryOptions o = Options(8 * kMiB);
  o.prefault = PrefaultMethod::kNone;
  o.use_huge_pages = false;  // hugetlb pages are allocated at reservation time
  auto seg = SegmentMemory::Allocate(o);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ(AllocatedBytes((*seg)->fd()), 0u);
  EXPECT_EQ((*seg)->prefault_time().count(), 0);
}

TEST(SegmentMemoryTest, OddSizeIsRoundedUpInTheMappingOnly) {
  auto seg = SegmentMemory::Allocate(Options(4097));
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ((*seg)->size(), 4097u);
  EXPECT_GE((*seg)->mapped_size(), 8192u);
  EXPECT_EQ((*seg)->mapped_size() % 4096, 0u);
  std::memset((*seg)->base(), 0xab, (*seg)->size());  // all of size() is writable
}

TEST(SegmentMemoryTest, SecondMappingOfTheMemfdSharesTheBytes) {
  auto seg = SegmentMemory::Allocate(Options(4 * kMiB));
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  auto* mine = static_cast<unsigned char*>((*seg)->base());
  const uint64_t n = (*seg)->size();
  for (uint64_t i = 0; i < n; ++i) mine[i] = static_cast<unsigned char>(i * 31 + 7);

  // What a same-host client does with the fd it receives: map it itself (here through a
  // dup, as SCM_RIGHTS would hand over a new descriptor for the same file).
  int fd = dup((*seg)->fd());
  ASSERT_GE(fd, 0);
  void* p = mmap(nullptr, (*seg)->mapped_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
  auto* theirs = static_cast<unsigned char*>(p);
  ASSERT_NE(theirs, mine);
  EXPECT_EQ(std::memcmp(theirs, mine, n), 0);

  // And the other way round: their writes are our bytes.
  std::memset(theirs + 1000, 0x5a, 3000);
  for (uint64_t i = 1000; i < 4000; ++i) ASSERT_EQ(mine[i], 0x5a) << i;

  munmap(p, (*seg)->mapped_size());
  close(fd);
}

TEST(SegmentMemoryTest, MemfdIsSealedAgainstResizing) {
  auto seg = SegmentMemory::Allocate(Options(4 * kMiB));
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  // Half of 4 MiB is a whole number of pages for every backing (hugetlbfs rejects other sizes
  // with EINVAL before it looks at seals).
  EXPECT_NE(ftruncate((*seg)->fd(), 2 * kMiB), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate((*seg)->fd(), 64 * kMiB), 0);
}

TEST(SegmentMemoryTest, RejectsBadSizes) {
  auto zero = SegmentMemory::Allocate(Options(0));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);

  auto huge = SegmentMemory::Allocate(Options(std::numeric_limits<uint64_t>::max()));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("not representable"), std::string::npos);

  auto past_off_t = SegmentMemory::Allocate(Options(1ull << 63));
  ASSERT_FALSE(past_off_t.ok());
  EXPECT_EQ(past_off_t.status().code(), StatusCode::kInvalidArgument);
}

TEST(SegmentMemoryTest, MoreThanTheHostHasIsNoSpace) {
  auto seg = SegmentMemory::Allocate(Options(1ull << 50));  // 1 PiB
  ASSERT_FALSE(seg.ok());
  EXPECT_EQ(seg.status().code(), StatusCode::kNoSpace) << seg.status().ToString();
}

TEST(SegmentMemoryTest, PlainPagesWhenHugePagesAreOff) {
  SegmentMemoryOptions o = Options(8 * kMiB);
  o.use_huge_pages = false;
  auto seg = SegmentMemory::Allocate(o);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  EXPECT_EQ((*seg)->backing(), SegmentBacking::k4K);
  EXPECT_EQ((*seg)->huge_page_bytes(), 0u);
}

TEST(SegmentMemoryTest, ReportsTheBackingTheKernelGave) {
  auto seg = SegmentMemory::Allocate(Options(16 * kMiB));
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  const SegmentBacking got = (*seg)->backing();
  if (FreeHugePages2M() >= 8) {
    EXPECT_EQ(got, SegmentBacking::kHugeTlb);
    EXPECT_EQ((*seg)->huge_page_bytes(), 16 * kMiB);
    EXPECT_EQ((*seg)->mapped_size() % (2 * kMiB), 0u);
  } else {
    EXPECT_NE(got, SegmentBacking::kHugeTlb);
    // With shmem THP off ("[never]" / "[deny]") no 2 MiB pages can appear.
    const std::string thp = ShmemThpSetting();
    if (thp.find("[never]") != std::string::npos || thp.find("[deny]") != std::string::npos) {
      EXPECT_EQ(got, SegmentBacking::k4K);
    }
    if (got == SegmentBacking::kTransparentHuge) {
      EXPECT_GT((*seg)->huge_page_bytes(), 0u);
    }
  }
  std::printf("backing on this host: %s\n", (*seg)->Describe().c_str());
}

TEST(SegmentMemoryTest, LockIsBestEffort) {
  SegmentMemoryOptions o = Options(4 * kMiB);
  o.lock_memory = true;
  auto seg = SegmentMemory::Allocate(o);
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();  // never fails because of mlock
  if (geteuid() == 0) {
    EXPECT_TRUE((*seg)->locked());
  }
}

}  // namespace
}  // namespace kvpool::store
