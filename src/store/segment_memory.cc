#include "store/segment_memory.h"

#include <fcntl.h>
#include <linux/memfd.h>  // MFD_HUGE_2MB (glibc's sys/mman.h lacks it)
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/byte_size.h"

namespace kvpool::store {
namespace {

constexpr uint64_t kSmallPage = 4096;
constexpr uint64_t kHugePage = 2ull << 20;
// Below this a slice is not worth a thread: spawning costs more than the faults it saves.
constexpr uint64_t kMinBytesPerThread = 64ull << 20;
constexpr int kMaxPrefaultThreads = 8;

std::string ErrnoText(int err) { return fmt::format("{} ({})", std::strerror(err), err); }

Status SyscallError(std::string_view call, int err) {
  if (err == ENOMEM) return NoSpace(fmt::format("{} failed: {}", call, ErrnoText(err)));
  return Internal(fmt::format("{} failed: {}", call, ErrnoText(err)));
}

// "Key:   123 kB" lines of /proc/meminfo, values in bytes (counts stay counts).
std::map<std::string, uint64_t> ReadMeminfo() {
  std::map<std::string, uint64_t> out;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream rest(line.substr(colon + 1));
    uint64_t value = 0;
    std::string unit;
    if (!(rest >> value)) continue;
    rest >> unit;
    out[line.substr(0, colon)] = unit == "kB" ? value * 1024 : value;
  }
  return out;
}

uint64_t ReadSysfsNumber(const char* path, uint64_t fallback) {
  std::ifstream in(path);
  uint64_t v = 0;
  return (in >> v) ? v : fallback;
}

// 2 MiB huge pages that a new mapping could reserve right now. Read from the 2 MiB pool's own
// counters because /proc/meminfo's HugePages_* describe the *default* size, which may be 1 GiB.
uint64_t FreeHugePages2M() {
  constexpr const char* kDir = "/sys/kernel/mm/hugepages/hugepages-2048kB/";
  uint64_t free_pages = ReadSysfsNumber((std::string(kDir) + "free_hugepages").c_str(), 0);
  uint64_t reserved = ReadSysfsNumber((std::string(kDir) + "resv_hugepages").c_str(), 0);
  return free_pages > reserved ? free_pages - reserved : 0;
}

// Reads back from /proc/self/smaps how much of [base, base+len) the kernel maps with PMD-sized
// (2 MiB) pages, so that the backing we report is the one we got, not the one we asked for.
uint64_t HugeMappedBytes(void* base) {
  std::ifstream in("/proc/self/smaps");
  const std::string header = fmt::format("{:x}-", reinterpret_cast<uintptr_t>(base));
  std::string line;
  bool inside = false;
  uint64_t huge = 0;
  uint64_t kernel_page = 0;
  uint64_t rss = 0;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.rfind(header, 0) == 0;
      continue;
    }
    // The next mapping's header ("start-end perms ...") ends our entry; field lines start with
    // a capitalised name followed by ':'.
    auto colon = line.find(':');
    auto space = line.find(' ');
    if (colon == std::string::npos || (space != std::string::npos && space < colon)) break;
    std::string key = line.substr(0, colon);
    std::istringstream rest(line.substr(colon + 1));
    uint64_t kb = 0;
    rest >> kb;
    if (key == "ShmemPmdMapped" || key == "FilePmdMapped") huge += kb * 1024;
    if (key == "KernelPageSize") kernel_page = kb * 1024;
    if (key == "Rss") rss = kb * 1024;
  }
  // hugetlb mappings report their page size instead of PMD counters.
  if (kernel_page >= kHugePage) return rss;
  return huge;
}

int DefaultPrefaultThreads() {
  unsigned hw = std::thread::hardware_concurrency();
  return std::clamp<int>(hw == 0 ? 1 : static_cast<int>(hw), 1, kMaxPrefaultThreads);
}

// Runs fn(begin, length) over `threads` slices of [base, base+len), each aligned to `granule`.
// Returns the first error a slice reported (as errno), 0 if none.
template <typename Fn>
int ForEachSlice(char* base, uint64_t len, uint64_t granule, int threads, Fn fn) {
  uint64_t pages = len / granule;
  uint64_t per_thread = (pages + threads - 1) / threads * granule;
  std::vector<int> errors(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    uint64_t begin = per_thread * t;
    if (begin >= len) break;
    uint64_t length = std::min(per_thread, len - begin);
    auto body = [&, t, begin, length] { errors[t] = fn(base + begin, length); };
    if (t == threads - 1 || per_thread * (t + 1) >= len) {
      body();  // the calling thread takes the last slice
    } else {
      workers.emplace_back(body);
    }
  }
  for (auto& w : workers) w.join();
  for (int e : errors) {
    if (e != 0) return e;
  }
  return 0;
}

}  // namespace

std::string_view SegmentBackingName(SegmentBacking backing) {
  switch (backing) {
    case SegmentBacking::kHugeTlb: return "hugetlb";
    case SegmentBacking::kTransparentHuge: return "thp";
    case SegmentBacking::k4K: return "4k";
  }
  return "unknown";
}

std::string_view PrefaultMethodName(PrefaultMethod method) {
  switch (method) {
    case PrefaultMethod::kAuto: return "auto";
    case PrefaultMethod::kPopulateAndTouch: return "populate+touch";
    case PrefaultMethod::kPopulateWrite: return "populate_write";
    case PrefaultMethod::kTouch: return "touch";
    case PrefaultMethod::kMapPopulate: return "map_populate";
    case PrefaultMethod::kNone: return "none";
  }
  return "unknown";
}

Result<std::unique_ptr<SegmentMemory>> SegmentMemory::Allocate(const SegmentMemoryOptions& options) {
  const uint64_t size = options.size_bytes;
  if (size == 0) return InvalidArgument("segment size must be > 0");
  // Room for rounding up to a huge page while staying a valid off_t (ftruncate) and size_t (mmap).
  constexpr uint64_t kMaxSize =
      std::min<uint64_t>(std::numeric_limits<off_t>::max(), std::numeric_limits<size_t>::max()) -
      kHugePage;
  if (size > kMaxSize) {
    return InvalidArgument(fmt::format("segment size {} bytes is not representable (max {})", size,
                                       kMaxSize));
  }

  std::unique_ptr<SegmentMemory> seg(new SegmentMemory());
  seg->size_ = size;
  PrefaultMethod method =
      options.prefault == PrefaultMethod::kAuto ? PrefaultMethod::kPopulateAndTouch : options.prefault;
  // MAP_POPULATE faults inside mmap(), so its clock starts here; the others' at step 3.
  auto start = std::chrono::steady_clock::now();

  // 1. hugetlb, when the pool has the pages. A failure here is not an error: fall back.
  const uint64_t huge_len = (size + kHugePage - 1) / kHugePage * kHugePage;
  if (options.use_huge_pages && FreeHugePages2M() >= huge_len / kHugePage) {
    int fd = memfd_create(options.name.c_str(),
                          MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_HUGE_2MB);
    if (fd < 0) {
      spdlog::debug("segment: memfd_create(MFD_HUGETLB) failed: {}; using regular pages",
                    ErrnoText(errno));
    } else if (ftruncate(fd, static_cast<off_t>(huge_len)) != 0) {
      spdlog::debug("segment: hugetlb ftruncate failed: {}; using regular pages", ErrnoText(errno));
      close(fd);
    } else {
      // MAP_SHARED on hugetlbfs reserves every page now, so ENOMEM shows up here (and we fall
      // back) rather than as SIGBUS on first touch.
      int flags = MAP_SHARED | (method == PrefaultMethod::kMapPopulate ? MAP_POPULATE : 0);
      void* p = mmap(nullptr, huge_len, PROT_READ | PROT_WRITE, flags, fd, 0);
      if (p == MAP_FAILED) {
        spdlog::debug("segment: hugetlb mmap failed: {}; using regular pages", ErrnoText(errno));
        close(fd);
      } else {
        seg->fd_ = fd;
        seg->base_ = p;
        seg->mapped_size_ = huge_len;
        seg->backing_ = SegmentBacking::kHugeTlb;
      }
    }
  }

  // 2. A regular memfd (shmem), asking for THP.
  if (seg->fd_ < 0) {
    const uint64_t len = (size + kSmallPage - 1) / kSmallPage * kSmallPage;
    // shmem is not bounded by anything but RAM: without this check an oversized segment would
    // be created fine and then get the process OOM-killed while pre-faulting.
    auto meminfo = ReadMeminfo();
    auto avail = meminfo.find("MemAvailable");
    if (method != PrefaultMethod::kNone && avail != meminfo.end() && len > avail->second) {
      return NoSpace(fmt::format("segment of {} exceeds the host's available memory ({})",
                                 FormatByteSize(len), FormatByteSize(avail->second)));
    }
    int fd = memfd_create(options.name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return SyscallError("memfd_create", errno);
    seg->fd_ = fd;  // closed by ~SegmentMemory on every error path below
    if (ftruncate(fd, static_cast<off_t>(len)) != 0) return SyscallError("ftruncate", errno);
    int flags = MAP_SHARED | (method == PrefaultMethod::kMapPopulate ? MAP_POPULATE : 0);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (p == MAP_FAILED) return SyscallError("mmap", errno);
    seg->base_ = p;
    seg->mapped_size_ = len;
    // Must precede the first fault to have any effect. (MAP_POPULATE has faulted already;
    // that method is for measurement only.)
    if (options.use_huge_pages && madvise(p, len, MADV_HUGEPAGE) != 0) {
      spdlog::debug("segment: madvise(MADV_HUGEPAGE) failed: {}", ErrnoText(errno));
    }
  }

  // A client holding the fd must not be able to shrink it under us (our accesses would SIGBUS).
  if (fcntl(seg->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    spdlog::warn("segment: could not seal the memfd: {}", ErrnoText(errno));
  }

  // 3. Pre-fault.
  const uint64_t granule = seg->backing_ == SegmentBacking::kHugeTlb ? kHugePage : kSmallPage;
  int threads = options.prefault_threads > 0 ? options.prefault_threads : DefaultPrefaultThreads();
  threads = static_cast<int>(std::clamp<uint64_t>(seg->mapped_size_ / kMinBytesPerThread, 1,
                                                   static_cast<uint64_t>(threads)));
  if (method == PrefaultMethod::kMapPopulate) threads = 1;
  char* base = static_cast<char*>(seg->base_);
  if (method != PrefaultMethod::kMapPopulate) start = std::chrono::steady_clock::now();
  const bool populate =
      method == PrefaultMethod::kPopulateWrite || method == PrefaultMethod::kPopulateAndTouch;
  const bool touch = method == PrefaultMethod::kTouch || method == PrefaultMethod::kPopulateAndTouch;
  if (populate || touch) {
    // Each thread populates its slice and then writes it, so both passes run in parallel.
    std::atomic<bool> populate_unsupported{false};
    int err = ForEachSlice(base, seg->mapped_size_, granule, threads, [&](char* p, uint64_t n) {
      if (populate && madvise(p, n, MADV_POPULATE_WRITE) != 0) {
        if (errno != EINVAL) return errno;
        populate_unsupported = true;  // kernel older than 5.14: touching alone still works
      }
      if (touch || populate_unsupported) {
        for (uint64_t off = 0; off < n; off += granule) static_cast<volatile char*>(p)[off] = 0;
      }
      return 0;
    });
    if (err != 0) return SyscallError("pre-fault (madvise MADV_POPULATE_WRITE)", err);
    if (populate_unsupported) {
      spdlog::debug("segment: MADV_POPULATE_WRITE unsupported; touched pages instead");
      method = PrefaultMethod::kTouch;
    }
  }
  if (method != PrefaultMethod::kNone) {
    seg->prefault_time_ = std::chrono::steady_clock::now() - start;
  }
  seg->prefault_method_ = method;
  seg->prefault_threads_ = threads;

  // 4. Lock, best-effort: a store that cannot lock still works, it may just be swapped.
  if (options.lock_memory) {
    if (mlock(seg->base_, seg->mapped_size_) == 0) {
      seg->locked_ = true;
    } else {
      spdlog::warn("segment: mlock of {} failed: {}; continuing unlocked (raise RLIMIT_MEMLOCK "
                   "or grant CAP_IPC_LOCK)",
                   FormatByteSize(seg->mapped_size_), ErrnoText(errno));
    }
  }

  // 5. What did the kernel actually give us? Only meaningful once pages are faulted.
  if (seg->backing_ == SegmentBacking::kHugeTlb) {
    seg->huge_page_bytes_ = seg->mapped_size_;
  } else if (method != PrefaultMethod::kNone) {
    seg->huge_page_bytes_ = HugeMappedBytes(seg->base_);
    if (seg->huge_page_bytes_ > 0) seg->backing_ = SegmentBacking::kTransparentHuge;
  }
  return seg;
}

SegmentMemory::~SegmentMemory() {
  if (base_ != nullptr) munmap(base_, mapped_size_);
  if (fd_ >= 0) close(fd_);
}

std::string SegmentMemory::Describe() const {
  std::string s = fmt::format("{} {}", FormatByteSize(size_), SegmentBackingName(backing_));
  if (backing_ == SegmentBacking::kTransparentHuge) {
    s += fmt::format(" ({} in 2 MiB pages)", FormatByteSize(huge_page_bytes_));
  }
  if (prefault_method_ == PrefaultMethod::kNone) {
    s += ", not pre-faulted";
  } else {
    s += fmt::format(", pre-faulted in {} ms ({} x{})",
                     std::chrono::duration_cast<std::chrono::milliseconds>(prefault_time_).count(),
                     PrefaultMethodName(prefault_method_), prefault_threads_);
  }
  if (locked_) s += ", locked";
  return s;
}

}  // namespace kvpool::store
