// What the benchmarks share: abort-on-error checks for kvpool Status values (a benchmark that
// hits an error has nothing to report), median timing helpers, and random block tables.
// gpu/gpu_bench_checks.h adds the CUDA check.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "common/status.h"
#include "connector/paged_kv_layout.h"

#define CHECK_OK(x)                                                                           \
  do {                                                                                        \
    ::kvpool::Status _s = (x);                                                                \
    if (!_s.ok()) {                                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, _s.ToString().c_str()); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

namespace kvpool::bench {

inline double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The middle element of `v` (the upper one of two for an even count). REQUIRES: not empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `blocks` distinct block ids drawn at random from [0, num_blocks), so a paged cache's tokens are
// scattered as a serving engine's are. REQUIRES: blocks <= num_blocks.
inline std::vector<connector::BlockId> RandomTable(uint64_t blocks, uint64_t num_blocks, uint64_t seed) {
  std::vector<connector::BlockId> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  all.resize(blocks);
  return all;
}

}  // namespace kvpool::bench
