// SegmentMemory: the bytes a storage service contributes to the pool.
//
// One contiguous mapping backed by a memfd, so that clients on the same host can map the very
// same pages (the shm transport hands them the fd) and copy without a socket on the path.
// Backing, best first:
//   hugetlb  memfd_create(MFD_HUGETLB | MFD_HUGE_2MB), only when /proc/meminfo shows enough
//            free (unreserved) 2 MiB huge pages; never changes nr_hugepages itself.
//   thp      a regular memfd with madvise(MADV_HUGEPAGE); the kernel gives 2 MiB pages only
//            if /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it.
//   4k       the same regular memfd when it does not.
// The backing reported is what the kernel actually gave (read back from /proc/self/smaps),
// not what was asked for.
//
// Every page is faulted in by Allocate() (several threads, one slice each), so the first
// puts into a fresh segment run at memcpy speed instead of paying ~12-15 us per 4 KiB page.
//
// The memfd is sealed against shrinking and growing: clients receive the fd, and one that
// truncated it would make the store's own accesses fault (SIGBUS).
//
// Not copyable or movable; the destructor unmaps and closes. Thread-safe for reads of its
// accessors; the bytes themselves are the caller's to synchronise.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvpool::store {

enum class SegmentBacking {
  kHugeTlb,          // explicit 2 MiB huge pages (hugetlbfs memfd)
  kTransparentHuge,  // regular memfd, at least part of it mapped by 2 MiB THP pages
  k4K,               // regular memfd, 4 KiB pages
};

// "hugetlb", "thp", "4k".
std::string_view SegmentBackingName(SegmentBacking backing);

// How Allocate() faults the pages in. kAuto is the fastest measured (see README.md): on a
// VM with shadow page tables (our 2-core dev machines) MADV_POPULATE_WRITE alone fills only
// the guest's page tables and every page still faults on its first user write, so the pages
// are also written once from user space; on bare metal that second pass finds every page
// mapped and costs a few ms per GiB. The other methods exist for the benchmark.
enum class PrefaultMethod {
  kAuto,              // = kPopulateAndTouch
  kPopulateAndTouch,  // per slice: madvise(MADV_POPULATE_WRITE), then one write per page
  kPopulateWrite,     // madvise(MADV_POPULATE_WRITE) per slice, one slice per thread (Linux 5.14+)
  kTouch,             // one write per page, one slice per thread
  kMapPopulate,       // mmap(MAP_POPULATE): the kernel faults everything, single-threaded
  kNone,              // leave pages to be faulted on first use (tests, benchmarks)
};

std::string_view PrefaultMethodName(PrefaultMethod method);

struct SegmentMemoryOptions {
  uint64_t size_bytes = 0;     // REQUIRES: > 0
  bool use_huge_pages = true;  // false => plain 4 KiB pages, no hugetlb/THP attempt
  bool lock_memory = false;    // mlock() the mapping; best-effort (failure is logged, see locked())
  PrefaultMethod prefault = PrefaultMethod::kAuto;
  int prefault_threads = 0;    // 0 => one per CPU, at most 8; small segments use fewer
  std::string name = "kvpool-segment";  // memfd name, shows in /proc/<pid>/fd and maps
};

class SegmentMemory {
 public:
  // Creates, maps and pre-faults a segment. Errors:
  //   INVALID_ARGUMENT  size 0, or a size that does not fit in off_t/size_t after rounding
  //   NO_SPACE          more than the memory the host has available, or the kernel said ENOMEM
  //   INTERNAL          any other failing system call (the message names it and errno)
  static Result<std::unique_ptr<SegmentMemory>> Allocate(const SegmentMemoryOptions& options);

  ~SegmentMemory();
  SegmentMemory(const SegmentMemory&) = delete;
  SegmentMemory& operator=(const SegmentMemory&) = delete;

  // [base(), base()+size()) is readable and writable for this object's lifetime.
  void* base() const { return base_; }
  // The size asked for. The memfd and mapping may be larger (rounded up to the page size).
  uint64_t size() const { return size_; }
  // Bytes actually mapped: size() rounded up to the backing's page size. A client mapping the
  // memfd may map up to this many bytes.
  uint64_t mapped_size() const { return mapped_size_; }
  // The memfd. Owned by this object: callers may dup() or send it, never close it.
  int fd() const { return fd_; }

  SegmentBacking backing() const { return backing_; }
  // Bytes of the mapping the kernel backs with 2 MiB pages (all of it for hugetlb).
  uint64_t huge_page_bytes() const { return huge_page_bytes_; }
  // The method used (never kAuto); kTouch where MADV_POPULATE_WRITE is unsupported.
  PrefaultMethod prefault_method() const { return prefault_method_; }
  // Wall time Allocate() spent faulting pages in (zero for kNone).
  std::chrono::nanoseconds prefault_time() const { return prefault_time_; }
  bool locked() const { return locked_; }

  // One line for logs: "1.0 GiB hugetlb, pre-faulted in 210 ms (populate_write x2), locked".
  std::string Describe() const;

 private:
  SegmentMemory() = default;

  void* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_size_ = 0;
  int fd_ = -1;
  SegmentBacking backing_ = SegmentBacking::k4K;
  uint64_t huge_page_bytes_ = 0;
  PrefaultMethod prefault_method_ = PrefaultMethod::kNone;
  int prefault_threads_ = 0;
  std::chrono::nanoseconds prefault_time_{0};
  bool locked_ = false;
};

}  // namespace kvpool::store
