// Restore benchmark (KVPOOL_CUDA=ON, full build): one pipeline stage's share of a long history
// restored by the connector's RestoreEngine from a real storage service into a paged KV cache
// on the GPU, next to a pinned host->device copy of the same bytes measured in the same run.
//
// Default: 131,072 tokens x 20 layers x 624 B per token-layer (the published model's
// 48,672 B/token over 78 layers; one PP4 stage's share, ~1.6 GB). The pool is an EmbeddedPool
// (master + storage service in this process, reached over the same client paths as a separate
// process: the segment is mapped from the store's memfd through its unix socket). Two modes:
//   mapped — RestoreEngine's default on one host: the GPU DMAs from the store's mapped segment;
//   staged — every window is first copied into the pinned staging buffer, then to the GPU.
// Every restored token-layer is compared with what was put before anything is timed.
//
// Usage: restore_bench [--tokens N] [--layers L] [--bytes B] [--workers W] [--reps R] [--json FILE]
// Exit 1 on a mismatch or a failed restore.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_bench_checks.h"
#include "client/client.h"
#include "connector/chunk_keys.h"
#include "connector/chunk_store.h"
#include "connector/prefix_lookup.h"
#include "connector/restore_engine.h"
#include "embedded/embedded_pool.h"
#include "store/storage_service.h"

using namespace kvpool;
using kvpool::bench::Median;
using kvpool::bench::Seconds;
using namespace kvpool::connector;
using Clock = std::chrono::steady_clock;

namespace {

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

// Every token-layer of the device cache equals the object bytes it was restored from.
bool CacheHoldsHistory(const PagedKvCache& cache, const std::vector<BlockId>& table, uint64_t tokens,
                       uint32_t chunk_tokens) {
  const PagedKvLayout& layout = cache.layout;
  const uint64_t object_bytes = layout.packed_chunk_bytes(chunk_tokens);
  const uint64_t token_bytes = layout.plane_token_bytes();
  std::vector<std::byte> object(object_bytes);
  std::vector<std::vector<std::byte>> planes(layout.num_planes());
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    planes[p].resize(layout.plane_bytes(cache.num_blocks));
    CHECK_CUDA(cudaMemcpy(planes[p].data(), cache.plane_bases[p], planes[p].size(), cudaMemcpyDeviceToHost));
  }
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

}  // namespace

int main(int argc, char** argv) {
  uint64_t tokens = 131072;
  uint32_t layers = 20, bytes_per_token_layer = 624, workers = 4;
  int reps = 7;
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokens") tokens = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--layers") layers = std::atoi(argv[i + 1]);
    else if (flag == "--bytes") bytes_per_token_layer = std::atoi(argv[i + 1]);
    else if (flag == "--workers") workers = std::atoi(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--json") json = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 0;
  }
  CHECK_CUDA(cudaSetDevice(0));

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
  std::printf("history: %lu tokens x %u layers x %u B = %.3f GB in %lu objects of %.2f MB\n",
              static_cast<unsigned long>(tokens), layers, bytes_per_token_layer, history_bytes / 1e9,
              static_cast<unsigned long>(chunks), object_bytes / 1e6);

  // The pool, with room to spare so nothing is evicted.
  const auto t_pool = Clock::now();
  auto pool = embedded::EmbeddedPool::Start(
      {.memory_bytes = history_bytes + history_bytes / 8 + (64 << 20), .lease_ms = 30000, .use_huge_pages = true});
  CHECK_OK(pool.status());
  client::ClientOptions co;
  co.pool = client::PoolParts::Single((*pool)->address());
  co.transfer.shm_copy_threads = 4;
  auto client = client::Client::Connect(co);
  CHECK_OK(client.status());
  PoolChunkStore store(client->get());
  std::printf("pool up in %.2f s (segment backed by %s)\n", Seconds(t_pool, Clock::now()),
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

  // The stage's paged cache on GPU 0, blocks in random order.
  PagedKvCache cache;
  cache.layout = PagedKvLayout::ForStage(spec, 0);
  const uint64_t blocks = tokens / spec.block_tokens;
  cache.num_blocks = blocks + blocks / 8;
  for (uint32_t p = 0; p < cache.layout.num_planes(); ++p) {
    void* plane;
    CHECK_CUDA(cudaMalloc(&plane, cache.layout.plane_bytes(cache.num_blocks)));
    cache.plane_bases.push_back(static_cast<std::byte*>(plane));
  }
  std::vector<BlockId> table(cache.num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(7));
  table.resize(blocks);

  // Baseline: pinned host -> device copy of the same number of bytes.
  void *pinned, *device;
  CHECK_CUDA(cudaHostAlloc(&pinned, history_bytes, cudaHostAllocDefault));
  CHECK_CUDA(cudaMalloc(&device, history_bytes));
  std::memset(pinned, 1, history_bytes);
  std::vector<double> h2d;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = Clock::now();
    CHECK_CUDA(cudaMemcpy(device, pinned, history_bytes, cudaMemcpyHostToDevice));
    if (r > 0) h2d.push_back(Seconds(t0, Clock::now()));
  }
  CHECK_CUDA(cudaFreeHost(pinned));
  CHECK_CUDA(cudaFree(device));
  const double h2d_gbps = history_bytes / Median(h2d) / 1e9;

  struct ModeResult {
    const char* name;
    double lookup_ms, restore_ms, gbps, mapped_share;
  };
  std::vector<ModeResult> results;
  bool ok = true;
  for (bool mapped : {true, false}) {
    RestoreOptions o;
    o.timeout = std::chrono::seconds(60);
    o.workers_per_stage = workers;
    o.staging_bytes_per_stage = uint64_t{256} << 20;
    o.unpack_from_mapped_segments = mapped;
    ConnectorMetrics metrics;
    auto engine = RestoreEngine::Create(&store, ns, {StageDevice{cache, 0}}, o, &metrics);
    CHECK_OK(engine.status());
    std::vector<double> lookup_s, restore_s;
    for (int r = 0; r <= reps; ++r) {  // run 0: warm-up (registration, first-touch) and check
      if (r == 0) {
        for (std::byte* p : cache.plane_bases) CHECK_CUDA(cudaMemset(p, 0, cache.layout.plane_bytes(cache.num_blocks)));
      }
      const auto t0 = Clock::now();
      auto hit = FindCachedPrefix(store, ns, ids, 0, &metrics);
      CHECK_OK(hit.status());
      const auto t1 = Clock::now();
      CHECK_OK((*engine)->Start(r, *hit, {table}));
      const RestoreOutcome out = (*engine)->Wait(r);
      const auto t2 = Clock::now();
      if (!out.status.ok() || out.restored_tokens != tokens) {
        std::fprintf(stderr, "restore failed: %s, %lu of %lu tokens\n", out.status.ToString().c_str(),
                     static_cast<unsigned long>(out.restored_tokens), static_cast<unsigned long>(tokens));
        return 1;
      }
      if (r == 0) {
        if (!CacheHoldsHistory(cache, table, tokens, spec.chunk_tokens)) ok = false;
        continue;
      }
      lookup_s.push_back(Seconds(t0, t1));
      restore_s.push_back(Seconds(t1, t2));
    }
    const double restored = static_cast<double>(metrics.restore_bytes.load());
    results.push_back({mapped ? "restore, mapped segment -> GPU" : "restore, via pinned staging",
                       Median(lookup_s) * 1e3, Median(restore_s) * 1e3, history_bytes / Median(restore_s) / 1e9,
                       restored > 0 ? metrics.restore_mapped_bytes.load() / restored : 0});
  }

  std::printf("\n%-34s %10s %10s %9s %10s %8s\n", "what", "lookup ms", "median ms", "GB/s", "vs pinned", "mapped");
  std::printf("%-34s %10s %10.1f %9.1f %10s %8s\n", "pinned host->device memcpy", "-", history_bytes / h2d_gbps / 1e6,
              h2d_gbps, "1.00", "-");
  for (const ModeResult& m : results) {
    std::printf("%-34s %10.2f %10.1f %9.1f %10.2f %7.0f%%\n", m.name, m.lookup_ms, m.restore_ms, m.gbps,
                m.gbps / h2d_gbps, m.mapped_share * 100);
  }
  std::printf("restored bytes == stored bytes: %s\n", ok ? "yes" : "NO");
  if (json) {
    FILE* out = std::fopen(json, "w");
    if (out) {
      std::fprintf(out, "{\"tokens\": %lu, \"history_bytes\": %lu, \"workers\": %u, \"pinned_h2d_gbps\": %.2f,",
                   static_cast<unsigned long>(tokens), static_cast<unsigned long>(history_bytes), workers, h2d_gbps);
      std::fprintf(out, " \"verified\": %s, \"modes\": [", ok ? "true" : "false");
      for (size_t i = 0; i < results.size(); ++i) {
        const ModeResult& m = results[i];
        std::fprintf(out, "%s{\"name\": \"%s\", \"lookup_ms\": %.3f, \"restore_ms\": %.3f, \"gbps\": %.2f, \"vs_pinned\": %.3f}",
                     i ? ", " : "", m.name, m.lookup_ms, m.restore_ms, m.gbps, m.gbps / h2d_gbps);
      }
      std::fprintf(out, "]}\n");
      std::fclose(out);
    }
  }
  for (std::byte* p : cache.plane_bases) cudaFree(p);
  return ok ? 0 : 1;
}
