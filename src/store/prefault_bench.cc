// Measures, for each pre-fault method and backing, the pre-fault time plus what the first
// write over the whole segment still costs afterwards. The numbers in README.md
// come from this program:   store_prefault_bench [size, default 1GiB] [threads, default 2]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_size.h"
#include "store/segment_memory.h"

using kvpool::store::PrefaultMethod;
using kvpool::store::SegmentMemory;
using kvpool::store::SegmentMemoryOptions;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Pre-faults a fresh segment with `method`, then writes all of it once with memset (what the
// first puts do). The sum is the number that matters: a method that leaves work for the
// first write has only moved the cost, not removed it.
void RunMethod(uint64_t size, bool huge, PrefaultMethod method, int threads) {
  SegmentMemoryOptions o;
  o.size_bytes = size;
  o.use_huge_pages = huge;
  o.prefault = method;
  o.prefault_threads = threads;
  auto seg = SegmentMemory::Allocate(o);
  if (!seg.ok()) {
    std::printf("  %s: %s\n", std::string(kvpool::store::PrefaultMethodName(method)).c_str(),
                seg.status().ToString().c_str());
    return;
  }
  auto start = Clock::now();
  std::memset((*seg)->base(), 0x5a, size);
  double first_write = Seconds(Clock::now() - start);
  start = Clock::now();
  std::memset((*seg)->base(), 0xa5, size);
  double second_write = Seconds(Clock::now() - start);
  double prefault = Seconds((*seg)->prefault_time());
  std::string label = std::string(kvpool::store::SegmentBackingName((*seg)->backing())) + " " +
                      std::string(kvpool::store::PrefaultMethodName((*seg)->prefault_method()));
  if (method != PrefaultMethod::kNone && method != PrefaultMethod::kMapPopulate) {
    label += " x" + std::to_string(threads);
  }
  std::printf("  %-26s %8.0f %10.0f %10.0f %10.0f %8.2f\n", label.c_str(), prefault * 1e3,
              first_write * 1e3, (prefault + first_write) * 1e3, second_write * 1e3,
              size / (prefault + first_write) / 1e9);
}

// fallocate() allocates the shmem pages without mapping them; the mapping still takes one
// (minor) fault per page afterwards. Measured raw, to decide whether it earns a method.
void RunFallocate(uint64_t size, int threads) {
  int fd = memfd_create("bench", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  auto start = Clock::now();
  if (fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0) std::perror("fallocate");
  auto mid = Clock::now();
  std::vector<std::thread> ts;
  uint64_t slice = size / threads;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([=] { madvise(static_cast<char*>(p) + slice * t, slice, MADV_POPULATE_WRITE); });
  }
  for (auto& t : ts) t.join();
  auto end = Clock::now();
  std::printf("  fallocate alone: %.0f ms; fallocate + populate_write x%d: %.0f ms\n",
              Seconds(mid - start) * 1e3, threads, Seconds(end - start) * 1e3);
  munmap(p, size);
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size = 1ull << 30;
  if (argc > 1) {
    auto parsed = kvpool::ParseByteSize(argv[1]);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
      return 2;
    }
    size = *parsed;
  }
  int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  std::printf("pre-fault %s, %d threads, %u CPUs\n", kvpool::FormatByteSize(size).c_str(),
              threads, std::thread::hardware_concurrency());
  for (bool huge : {false, true}) {
    std::printf("use_huge_pages=%s\n  %-26s %8s %10s %10s %10s %8s\n", huge ? "true" : "false",
                "backing method", "prefault", "1st write", "sum (ms)", "2nd write", "GB/s");
    RunMethod(size, huge, PrefaultMethod::kNone, threads);
    RunMethod(size, huge, PrefaultMethod::kTouch, 1);
    RunMethod(size, huge, PrefaultMethod::kTouch, threads);
    RunMethod(size, huge, PrefaultMethod::kMapPopulate, 1);
    RunMethod(size, huge, PrefaultMethod::kPopulateWrite, threads);
    RunMethod(size, huge, PrefaultMethod::kPopulateAndTouch, 1);
    RunMethod(size, huge, PrefaultMethod::kPopulateAndTouch, threads);
  }
  std::printf("raw shmem fallocate (single call, inode-locked), for comparison:\n");
  RunFallocate(size, threads);
  return 0;
}
