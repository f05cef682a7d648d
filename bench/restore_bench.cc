// Restore benchmark: one pipeline stage's share of a long history restored by the connector's
// RestoreEngine from a real storage service into a paged KV cache — on the GPU (the engine's
// CUDA packer; the reference is a pinned host->device copy of the same bytes) or in host
// memory (the CPU packer; the reference is a one-thread memcpy of the same bytes) — each
// path with and without the end-to-end checksum check, so its cost is measured in one run.
//
// Default: 131,072 tokens x 20 layers x 624 B per token-layer (the published model's
// 48,672 B/token over 78 layers; one PP4 stage's share, ~1.6 GB). The pool is an EmbeddedPool
// (master + storage service in this process, reached over the same client paths as a separate
// process: the segment is mapped from the store's memfd through its unix socket). Paths:
//   mapped — RestoreEngine's default on one host: the unpack reads the store's mapped segment
//            (the GPU DMAs from it);
//   staged — every window is first read into the staging buffer (pinned for a GPU) by the
//            client, then unpacked from there.
// With checksums, every object is checked as the engine does in service: on the GPU, hashed
// in device memory after the DMA; in host memory, staged objects by the transport as they
// land in staging, mapped ones on RestoreOptions::checksum_threads helpers while the CPU
// packer copies them.
// The four modes take turns within each repetition, so load from elsewhere hits them alike.
// Every restored token-layer is compared with what was put before anything is timed; after
// the timed runs, each checking mode must stop its restore right before an object whose
// stored bytes had a bit flipped.
//
// Usage: restore_bench [--device gpu|cpu] [--tokens N] [--layers L] [--bytes B] [--workers W]
//                      [--copy-threads C] [--checksum-threads H] [--reps R] [--json FILE]
// --copy-threads: the client's shm_copy_threads (default 4); --checksum-threads: the engine's
// checksum_threads (default 0, its own choice).
// Default device: gpu when built with CUDA and one is present, else cpu.
// Exit 1 on a mismatch or a failed restore.
#if KVPOOL_WITH_CUDA
#include <cuda_runtime.h>

#include "gpu/gpu_bench_checks.h"
#else
#include "bench_checks.h"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "client/client.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_store.h"
#include "connector/prefix_lookup.h"
#include "connector/restore_engine.h"
#include "embedded/embedded_pool.h"
#include "store/storage_service.h"
#include "store/test_corruption.h"

using namespace kvpool;
using kvpool::bench::Median;
using kvpool::bench::Seconds;
using namespace kvpool::connector;
using BenchClock = std::chrono::steady_clock;

namespace {

// A restore that has not answered this long after its Wait began (its own bounded wait,
// RestoreOptions::timeout below, is 60 s) fails the run with NOT_READY.
constexpr std::chrono::seconds kWaitLimit{120};

// The bytes of chunk `chunk`'s stage object: a function of (chunk, offset) only, so the check
// needs no second copy of the history.
void FillObject(uint64_t chunk, std::byte* out, uint64_t bytes) {
  uint64_t x = chunk * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < bytes; i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(out + i, &z, std::min<uint64_t>(8, bytes - i));
  }
}

// A stage's paged cache on GPU `device`, or in host memory for -1.
class BenchCache {
 public:
  BenchCache(PagedKvLayout layout, uint64_t num_blocks, int device) : device_(device) {
    cache_.layout = layout;
    cache_.num_blocks = num_blocks;
    for (uint32_t p = 0; p < layout.num_planes(); ++p) {
      const uint64_t bytes = layout.plane_bytes(num_blocks);
      void* plane = nullptr;
#if KVPOOL_WITH_CUDA
      if (device >= 0) CHECK_CUDA(cudaMalloc(&plane, bytes));
#endif
      if (device < 0) {
        plane = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        std::memset(plane, 0, bytes);  // fault the pages in before anything is timed
      }
      cache_.plane_bases.push_back(static_cast<std::byte*>(plane));
    }
  }
  ~BenchCache() {
    for (std::byte* p : cache_.plane_bases) {
#if KVPOOL_WITH_CUDA
      if (device_ >= 0) cudaFree(p);
#endif
      if (device_ < 0) std::free(p);
    }
  }
  const PagedKvCache& cache() const { return cache_; }
  void Clear() {
    for (std::byte* p : cache_.plane_bases) {
#if KVPOOL_WITH_CUDA
      if (device_ >= 0) CHECK_CUDA(cudaMemset(p, 0, cache_.layout.plane_bytes(cache_.num_blocks)));
#endif
      if (device_ < 0) std::memset(p, 0, cache_.layout.plane_bytes(cache_.num_blocks));
    }
  }
  // Plane `p` copied to host memory.
  std::vector<std::byte> Plane(uint32_t p) const {
    std::vector<std::byte> out(cache_.layout.plane_bytes(cache_.num_blocks));
#if KVPOOL_WITH_CUDA
    if (device_ >= 0) CHECK_CUDA(cudaMemcpy(out.data(), cache_.plane_bases[p], out.size(), cudaMemcpyDeviceToHost));
#endif
    if (device_ < 0) std::memcpy(out.data(), cache_.plane_bases[p], out.size());
    return out;
  }

 private:
  PagedKvCache cache_;
  int device_;
};

// Every token-layer of the cache equals the object bytes it was restored from.
bool CacheHoldsHistory(const BenchCache& bench_cache, const std::vector<BlockId>& table, uint64_t tokens,
                       uint32_t chunk_tokens) {
  const PagedKvLayout& layout = bench_cache.cache().layout;
  const uint64_t object_bytes = layout.packed_chunk_bytes(chunk_tokens);
  const uint64_t token_bytes = layout.plane_token_bytes();
  std::vector<std::byte> object(object_bytes);
  std::vector<std::vector<std::byte>> planes;
  for (uint32_t p = 0; p < layout.num_planes(); ++p) planes.push_back(bench_cache.Plane(p));
  for (uint64_t c = 0; c < tokens / chunk_tokens; ++c) {
    FillObject(c, object.data(), object_bytes);
    for (uint32_t layer = 0; layer < layout.num_layers; ++layer) {
      for (uint32_t plane = 0; plane < layout.planes_per_layer(); ++plane) {
        for (uint32_t t = 0; t < chunk_tokens; ++t) {
          const uint64_t token = c * chunk_tokens + t;
          const std::byte* got = planes[layer * layout.planes_per_layer() + plane].data() +
                                 table[token / layout.block_tokens] * layout.block_stride() +
                                 (token % layout.block_tokens) * token_bytes;
          if (std::memcmp(got, object.data() + layout.packed_offset(chunk_tokens, layer, plane, t), token_bytes)) {
            std::fprintf(stderr, "MISMATCH at token %lu layer %u\n", static_cast<unsigned long>(token), layer);
            return false;
          }
        }
      }
    }
  }
  return true;
}

// The reference copy of `bytes` bytes: pinned host -> device on a GPU, one memcpy thread on the CPU.
double ReferenceGbps(uint64_t bytes, int device, int reps) {
  std::vector<double> runs;
#if KVPOOL_WITH_CUDA
  if (device >= 0) {
    void *pinned, *gpu;
    CHECK_CUDA(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
    CHECK_CUDA(cudaMalloc(&gpu, bytes));
    std::memset(pinned, 1, bytes);
    for (int r = 0; r <= reps; ++r) {
      const auto t0 = BenchClock::now();
      CHECK_CUDA(cudaMemcpy(gpu, pinned, bytes, cudaMemcpyHostToDevice));
      if (r > 0) runs.push_back(Seconds(t0, BenchClock::now()));
    }
    CHECK_CUDA(cudaFreeHost(pinned));
    CHECK_CUDA(cudaFree(gpu));
  }
#endif
  if (device < 0) {
    std::vector<std::byte> from(bytes, std::byte{1}), to(bytes, std::byte{0});
    for (int r = 0; r <= reps; ++r) {
      const auto t0 = BenchClock::now();
      std::memcpy(to.data(), from.data(), bytes);
      if (r > 0) runs.push_back(Seconds(t0, BenchClock::now()));
    }
  }
  return bytes / Median(runs) / 1e9;
}

int DefaultDevice() {
#if KVPOOL_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return 0;
#endif
  return -1;
}

struct Mode {
  bool mapped = true;
  bool checksums = true;
  std::unique_ptr<RestoreEngine> engine;
  ConnectorMetrics metrics;
  std::vector<double> lookup_s, restore_s;
  std::string name() const {
    return std::string(mapped ? "mapped" : "staged") + (checksums ? ", checksums" : ", no checksums");
  }
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t tokens = 131072;
  uint32_t layers = 20, bytes_per_token_layer = 624, workers = 4;
  int reps = 7, copy_threads = 4, checksum_threads = 0;
  int device = DefaultDevice();
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokens") tokens = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--layers") layers = std::atoi(argv[i + 1]);
    else if (flag == "--bytes") bytes_per_token_layer = std::atoi(argv[i + 1]);
    else if (flag == "--workers") workers = std::atoi(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--copy-threads") copy_threads = std::atoi(argv[i + 1]);
    else if (flag == "--checksum-threads") checksum_threads = std::atoi(argv[i + 1]);
    else if (flag == "--device") device = std::string(argv[i + 1]) == "cpu" ? -1 : 0;
    else if (flag == "--json") json = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (device >= 0 && DefaultDevice() < 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 0;
  }
#if KVPOOL_WITH_CUDA
  if (device >= 0) CHECK_CUDA(cudaSetDevice(device));
#endif

  KvModelSpec spec;
  spec.model_id = "restore-bench";
  spec.kv_dtype = "fp8_e4m3";
  spec.layout = KvLayoutKind::kLatent;
  spec.bytes_per_token_per_layer = bytes_per_token_layer;
  spec.stage_layers = {layers};
  auto ns_or = KvNamespace::Create(spec);
  CHECK_OK(ns_or.status());
  const KvNamespace ns = ns_or.value();
  tokens -= tokens % spec.chunk_tokens;
  const uint64_t chunks = tokens / spec.chunk_tokens;
  const uint64_t object_bytes = spec.stage_object_bytes(0);
  const uint64_t history_bytes = chunks * object_bytes;
  std::printf("device: %s; history: %lu tokens x %u layers x %u B = %.3f GB in %lu objects of %.2f MB\n",
              device >= 0 ? "GPU 0" : "CPU (host memory)", static_cast<unsigned long>(tokens), layers,
              bytes_per_token_layer, history_bytes / 1e9, static_cast<unsigned long>(chunks), object_bytes / 1e6);

  // The pool, with room to spare so nothing is evicted.
  const auto t_pool = BenchClock::now();
  auto pool = embedded::EmbeddedPool::Start(
      {.memory_bytes = history_bytes + history_bytes / 8 + (64 << 20), .lease_ms = 30000, .use_huge_pages = true});
  CHECK_OK(pool.status());
  client::ClientOptions co;
  co.pool = client::PoolParts::Single((*pool)->address());
  co.transfer.shm_copy_threads = copy_threads;
  auto client = client::Client::Connect(co);
  CHECK_OK(client.status());
  PoolChunkStore store(client->get());
  std::printf("pool up in %.2f s (segment backed by %s)\n", Seconds(t_pool, BenchClock::now()),
              std::string(store::SegmentBackingName((*pool)->store().memory().backing())).c_str());

  std::vector<TokenId> ids(tokens);
  std::iota(ids.begin(), ids.end(), 1);
  const std::vector<ChunkKey> keys = ChainChunkKeys(ns, ids);
  {
    const uint64_t batch = 16;
    std::vector<std::byte> values(batch * object_bytes);
    for (uint64_t first = 0; first < chunks; first += batch) {
      const uint64_t n = std::min(batch, chunks - first);
      std::vector<std::string> names, groups;
      std::vector<client::ValueView> views;
      for (uint64_t i = 0; i < n; ++i) {
        FillObject(first + i, values.data() + i * object_bytes, object_bytes);
        names.push_back(StageObjectKey(ns, keys[first + i], 0));
        groups.push_back(ChunkGroupName(ns, keys[first + i]));
        views.emplace_back(values.data() + i * object_bytes, object_bytes);
      }
      for (const Status& s : store.Put(names, views, groups)) CHECK_OK(s);
    }
  }

  // The stage's paged cache, blocks in random order.
  const uint64_t blocks = tokens / spec.block_tokens;
  BenchCache cache(PagedKvLayout::ForStage(spec, 0), blocks + blocks / 8, device);
  const std::vector<BlockId> table = bench::RandomTable(blocks, blocks + blocks / 8, 7);
  const double reference_gbps = ReferenceGbps(history_bytes, device, reps);

  std::vector<Mode> modes(4);
  for (size_t m = 0; m < modes.size(); ++m) {
    Mode& mode = modes[m];
    mode.mapped = m < 2;
    mode.checksums = m % 2 == 0;
    RestoreOptions o;
    o.timeout = std::chrono::seconds(60);
    o.workers_per_stage = workers;
    o.staging_bytes_per_stage = uint64_t{256} << 20;
    o.unpack_from_mapped_segments = mode.mapped;
    o.verify_checksums = mode.checksums;
    o.checksum_threads = checksum_threads;
    auto engine = RestoreEngine::Create(&store, ns, {StageDevice{cache.cache(), device}}, o, &mode.metrics);
    CHECK_OK(engine.status());
    mode.engine = std::move(engine).value();
  }
  bool ok = true;
  uint64_t request = 0;
  for (int r = 0; r <= reps; ++r) {  // run 0: warm-up (registration, first touch) and the check
    for (Mode& mode : modes) {
      if (r == 0) cache.Clear();
      const auto t0 = BenchClock::now();
      auto hit = FindCachedPrefix(store, ns, ids, 0, &mode.metrics);
      CHECK_OK(hit.status());
      const auto t1 = BenchClock::now();
      CHECK_OK(mode.engine->Start(++request, *hit, {table}));
      const RestoreOutcome out = mode.engine->Wait(request, BenchClock::now() + kWaitLimit);
      const auto t2 = BenchClock::now();
      if (!out.status.ok() || out.restored_tokens != tokens) {
        std::fprintf(stderr, "%s: restore failed: %s, %lu of %lu tokens\n", mode.name().c_str(),
                     out.status.ToString().c_str(), static_cast<unsigned long>(out.restored_tokens),
                     static_cast<unsigned long>(tokens));
        return 1;
      }
      if (r == 0) {
        if (!CacheHoldsHistory(cache, table, tokens, spec.chunk_tokens)) ok = false;
        continue;
      }
      mode.lookup_s.push_back(Seconds(t0, t1));
      mode.restore_s.push_back(Seconds(t1, t2));
    }
  }

  // A flipped bit in the store is caught, never restored. The engine drops the object it
  // caught, so the prefix ends there and each mode's bad object lies before the last one's.
  std::vector<std::pair<std::string, bool>> caught;
  uint64_t bad_chunk = chunks / 2;
  for (Mode& mode : modes) {
    if (!mode.checksums) continue;
    std::vector<std::byte> value(object_bytes);
    FillObject(bad_chunk, value.data(), object_bytes);
    if (!store::testing::FlipBitOfStoredValue((*pool)->store(), value)) {
      std::fprintf(stderr, "chunk %lu not found in the store's segment\n", static_cast<unsigned long>(bad_chunk));
      return 1;
    }
    auto hit = FindCachedPrefix(store, ns, ids, 0, &mode.metrics);
    CHECK_OK(hit.status());
    CHECK_OK(mode.engine->Start(++request, *hit, {table}));
    const RestoreOutcome out = mode.engine->Wait(request, BenchClock::now() + kWaitLimit);
    caught.emplace_back(mode.name(), out.status.code() == StatusCode::kCorrupt &&
                                         out.restored_tokens == bad_chunk * spec.chunk_tokens &&
                                         mode.metrics.restore_corrupt_objects.load() == 1);
    std::printf("%s: a flipped bit in chunk %lu of %lu: restored %lu tokens, %s\n", mode.name().c_str(),
                static_cast<unsigned long>(bad_chunk), static_cast<unsigned long>(chunks),
                static_cast<unsigned long>(out.restored_tokens), caught.back().second ? "caught" : "NOT CAUGHT");
    ok = ok && caught.back().second;
    bad_chunk /= 2;
  }

  const char* reference = device >= 0 ? "pinned host->device memcpy" : "memcpy, 1 thread";
  std::printf("\n%-34s %10s %10s %9s %10s %14s\n", "what", "lookup ms", "median ms", "GB/s", "vs ref", "checksum cost");
  std::printf("%-34s %10s %10.1f %9.1f %10s %14s\n", reference, "-", history_bytes / reference_gbps / 1e6,
              reference_gbps, "1.00", "-");
  for (const Mode& m : modes) {
    const double gbps = history_bytes / Median(m.restore_s) / 1e9;
    const Mode& pair = modes[(&m - modes.data()) ^ 1];  // the same path with the other setting
    const std::string cost =
        m.checksums ? fmt::format("{:+.1f}%", (Median(m.restore_s) / Median(pair.restore_s) - 1) * 100) : "-";
    std::printf("%-34s %10.2f %10.1f %9.1f %10.2f %14s\n", ("restore, " + m.name()).c_str(),
                Median(m.lookup_s) * 1e3, Median(m.restore_s) * 1e3, gbps, gbps / reference_gbps, cost.c_str());
  }
  std::printf("restored bytes == stored bytes, flipped bits caught: %s\n", ok ? "yes" : "NO");
  if (json) {
    nlohmann::json out = {{"device", device >= 0 ? "gpu" : "cpu"}, {"tokens", tokens},
                          {"history_bytes", history_bytes},     {"workers", workers},
                          {"copy_threads", copy_threads},       {"checksum_threads", checksum_threads},
                          {"reps", reps},                       {"reference", reference},
                          {"reference_gbps", reference_gbps},   {"verified", ok}};
    for (const auto& [mode, yes] : caught) out["flipped_bit_caught"][mode] = yes;
    for (const Mode& m : modes) {
      std::vector<double> runs_ms;
      for (double s : m.restore_s) runs_ms.push_back(s * 1e3);
      out["modes"].push_back({{"path", m.mapped ? "mapped" : "staged"},
                              {"checksums", m.checksums},
                              {"lookup_ms", Median(m.lookup_s) * 1e3},
                              {"restore_ms", Median(m.restore_s) * 1e3},
                              {"restore_ms_runs", runs_ms}});
    }
    std::ofstream(json) << out.dump(2) << "\n";
  }
  return ok ? 0 : 1;
}
