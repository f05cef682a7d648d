// The SSD tier's I/O at one block size, one timed pass, `queue_depth` requests in flight:
//   file (default) — ssd/tier_file.h: random writes or reads of distinct block-aligned slots;
//   --objects      — ssd/ssd_tier.h: puts or gets of objects of one block each (a slot is the
//                    block and its 4 KiB header), in one batch; GB/s counts value bytes only.
// scripts/bench-ssd.sh runs both beside fio with the same block size, queue depth and O_DIRECT,
// in one run, and writes docs/results/ssd-io.json.
//
// usage: kvpool_ssd_io_bench --file F --file-size 4GiB --block 4MiB --bytes 1GiB --queue-depth 8
//                            --op write|read [--objects] [--seed N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/byte_size.h"
#include "ssd/ssd_tier.h"
#include "ssd/tier_file.h"

using namespace kvpool;

namespace {

struct Buffers {  // page-aligned, as O_DIRECT wants
  Buffers(uint64_t count, uint64_t bytes)
      : bytes(bytes), data(static_cast<std::byte*>(std::aligned_alloc(4096, count * bytes))) {}
  ~Buffers() { std::free(data); }
  uint64_t bytes;
  std::byte* data;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("kvpool SSD tier file I/O: one timed pass");
  std::string path, file_size_text = "4GiB", block_text = "4MiB", bytes_text = "1GiB", op = "write";
  unsigned depth = 8;
  uint64_t seed = 1;
  bool json = false, objects = false;
  app.add_option("--file", path, "the tier file (created and allocated when missing)")->required();
  app.add_option("--file-size", file_size_text, "size of the file");
  app.add_option("--block", block_text, "bytes per request");
  app.add_option("--bytes", bytes_text, "bytes the pass moves");
  app.add_option("--queue-depth", depth, "requests in flight");
  app.add_option("--op", op, "write or read")->check(CLI::IsMember({"write", "read"}));
  app.add_option("--seed", seed, "picks the slots");
  app.add_flag("--json", json, "one JSON line instead of text");
  app.add_flag("--objects", objects, "through the tier's objects (SsdTier) instead of the bare file");
  CLI11_PARSE(app, argc, argv);
  if (json) spdlog::set_level(spdlog::level::warn);  // stdout carries the JSON line alone
  Result<uint64_t> file_size = ParseByteSize(file_size_text), block = ParseByteSize(block_text),
                   bytes = ParseByteSize(bytes_text);
  for (const Result<uint64_t>* r : {&file_size, &block, &bytes}) {
    if (!r->ok()) {
      std::fprintf(stderr, "%s\n", r->status().ToString().c_str());
      return 2;
    }
  }
  const uint64_t slot_bytes = objects ? *block + ssd::SsdTier::kHeaderBytes : *block;
  const uint64_t slots = *file_size / slot_bytes, requests = *bytes / *block;
  if (requests == 0 || requests > slots) {
    std::fprintf(stderr, "--bytes must hold at least one --block and fit in --file-size\n");
    return 2;
  }
  // Distinct slots in random order; 2 x depth buffers, so requests in flight rarely share one.
  std::vector<uint64_t> order(slots);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  Buffers buffers(2 * depth, *block);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < 2 * depth * *block; i += 8) {
    const uint64_t v = rng();
    std::memcpy(buffers.data + i, &v, 8);
  }
  auto buffer = [&](uint64_t r) { return std::span<std::byte>(buffers.data + (r % (2 * depth)) * *block, *block); };
  std::vector<Status> done;
  double seconds = 0;
  bool direct = false;
  if (objects) {
    auto tier = ssd::SsdTier::Open(path, slots * slot_bytes, {.slot_bytes = slot_bytes, .file = {.queue_depth = depth}});
    if (!tier.ok()) {
      std::fprintf(stderr, "%s\n", tier.status().ToString().c_str());
      return 1;
    }
    std::vector<std::string> keys;
    for (uint64_t r = 0; r < requests; ++r) keys.push_back("object-" + std::to_string(order[r]));
    const auto t0 = std::chrono::steady_clock::now();
    if (op == "write") {
      std::vector<ssd::SsdPut> puts;
      for (uint64_t r = 0; r < requests; ++r) puts.push_back({keys[r], "", buffer(r)});
      done = (*tier)->Put(puts);
    } else {
      std::vector<ssd::SsdGet> gets;
      for (uint64_t r = 0; r < requests; ++r) gets.push_back({keys[r], buffer(r)});
      for (const Result<uint64_t>& got : (*tier)->Get(gets)) done.push_back(got.status());
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    direct = true;
  } else {
    auto file = ssd::TierFile::Open(path, slots * *block, {.queue_depth = depth});
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
      return 1;
    }
    std::vector<ssd::FileIo> ios;
    for (uint64_t r = 0; r < requests; ++r) {
      ios.push_back({op == "write" ? ssd::FileIo::kWrite : ssd::FileIo::kRead, order[r] * *block, buffer(r)});
    }
    const auto t0 = std::chrono::steady_clock::now();
    done = (*file)->Run(ios);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    direct = (*file)->direct();
  }
  for (const Status& s : done) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  const double gbps = requests * *block / seconds / 1e9;
  if (json) {
    std::printf("%s\n", nlohmann::json{{"tool", objects ? "kvpool-objects" : "kvpool"}, {"op", op}, {"block_bytes", *block}, {"queue_depth", depth},
                                       {"bytes", requests * *block}, {"seconds", seconds}, {"gbps", gbps},
                                       {"direct", direct}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s %lu x %lu B, depth %u, %s: %.2f GB/s\n", op.c_str(), static_cast<unsigned long>(requests),
                static_cast<unsigned long>(*block), depth, direct ? "O_DIRECT" : "page cache", gbps);
  }
  return 0;
}
