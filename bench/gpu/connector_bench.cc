// connector_bench: GPU numbers for the connector's data path, one table row per line.
//
//  kernel   unpack/pack of a 128K-token stage history between packed device staging and a
//           paged cache with random block ids, vs cudaMemcpy device->device of the same bytes
//           (target >= 70%).
//  restore  that history from a storage segment's memory (memfd served by a SegmentServer,
//           read through the TransferEngine's shm path into pinned staging, as the pool client
//           does) into the paged cache, vs a pinned host->device cudaMemcpy of the same bytes
//           (target >= 80%). The restored cache is checked byte for byte against the source.
//
// Usage: connector_bench [--tokens N] [--json FILE]. Exit 1 on any mismatch (targets missed
// are reported, not fatal). No master: the lookup round trip is not part of these numbers.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_bench_checks.h"
#include "connector/chunk_packing.h"
#include "transfer/segment_server.h"
#include "transfer/memfd_region.h"
#include "transfer/transfer_engine.h"

using namespace kvpool;
using kvpool::bench::Median;
using kvpool::bench::RandomTable;
using kvpool::bench::Seconds;
using namespace kvpool::connector;
using BenchClock = std::chrono::steady_clock;

namespace {

struct DeviceCache {
  PagedKvCache cache;
  std::vector<void*> allocs;
  ~DeviceCache() {
    for (void* p : allocs) cudaFree(p);
  }
};

void MakeDeviceCache(DeviceCache& d, const PagedKvLayout& layout, uint64_t num_blocks) {
  d.cache.layout = layout;
  d.cache.num_blocks = num_blocks;
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    void* ptr;
    CHECK_CUDA(cudaMalloc(&ptr, layout.plane_bytes(num_blocks)));
    CHECK_CUDA(cudaMemset(ptr, 0, layout.plane_bytes(num_blocks)));
    d.allocs.push_back(ptr);
    d.cache.plane_bases.push_back(static_cast<std::byte*>(ptr));
  }
}

// Median of `reps` timings of fn() (each fully synchronised), after one untimed warm-up run.
template <typename F>
double MedianSeconds(int reps, F fn) {
  fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = BenchClock::now();
    fn();
    CHECK_CUDA(cudaDeviceSynchronize());
    times.push_back(Seconds(t0, BenchClock::now()));
  }
  return Median(times);
}

struct Row {
  std::string name;
  double gbps, reference_gbps, target;
  bool ok;
};
std::vector<Row> rows;
bool mismatch = false;

void KernelBench(const char* name, const PagedKvLayout& layout, uint64_t tokens) {
  const uint32_t chunk_tokens = 256;
  const uint64_t chunks = tokens / chunk_tokens;
  const uint64_t blocks = chunks * chunk_tokens / layout.block_tokens;
  const uint64_t num_blocks = blocks + blocks / 8;
  const uint64_t bytes = chunks * layout.packed_chunk_bytes(chunk_tokens);
  DeviceCache cache;
  MakeDeviceCache(cache, layout, num_blocks);
  const auto table = RandomTable(blocks, num_blocks, 7);
  void *staging, *copy_dst;
  CHECK_CUDA(cudaMalloc(&staging, bytes));
  CHECK_CUDA(cudaMalloc(&copy_dst, bytes));
  CHECK_CUDA(cudaMemset(staging, 0x5a, bytes));
  auto packer = NewCudaChunkPacker(0).value();
  ChunkTransfer t{&cache.cache, table, chunk_tokens, 0, chunks, 0, static_cast<std::byte*>(staging)};
  const double unpack = MedianSeconds(9, [&] {
    CHECK_OK(packer->Unpack(t));
    CHECK_OK(packer->Wait());
  });
  const double pack = MedianSeconds(9, [&] {
    CHECK_OK(packer->Pack(t));
    CHECK_OK(packer->Wait());
  });
  const double d2d = MedianSeconds(9, [&] { CHECK_CUDA(cudaMemcpy(copy_dst, staging, bytes, cudaMemcpyDeviceToDevice)); });
  const double ref = bytes / d2d / 1e9;
  rows.push_back({std::string("unpack ") + name, bytes / unpack / 1e9, ref, 0.70, bytes / unpack / 1e9 >= 0.70 * ref});
  rows.push_back({std::string("pack   ") + name, bytes / pack / 1e9, ref, 0.70, bytes / pack / 1e9 >= 0.70 * ref});
  std::printf("kernel %-5s %.2f GB over %lu chunks: unpack %.2f ms, pack %.2f ms, d2d memcpy %.2f ms\n", name,
              bytes / 1e9, static_cast<unsigned long>(chunks), unpack * 1e3, pack * 1e3, d2d * 1e3);
  cudaFree(staging);
  cudaFree(copy_dst);
}

void RestoreBench(const PagedKvLayout& layout, uint64_t tokens, int copy_threads) {
  const uint32_t chunk_tokens = 256;
  const uint64_t chunks = tokens / chunk_tokens;
  const uint64_t object = layout.packed_chunk_bytes(chunk_tokens);
  const uint64_t bytes = chunks * object;
  const uint64_t blocks = chunks * chunk_tokens / layout.block_tokens;
  const uint64_t num_blocks = blocks + blocks / 8;

  // The "store": a memfd segment holding every chunk's packed object back to back.
  auto region = transfer::MemfdRegion::Create(bytes).value();
  {
    std::vector<std::thread> fill;
    const uint64_t per = (bytes + 7) / 8;
    for (int i = 0; i < 8; ++i) {
      fill.emplace_back([&, i] {
        const uint64_t lo = std::min(bytes, i * per), hi = std::min(bytes, lo + per);
        transfer::FillPattern(region->data() + lo, lo, hi - lo, 99);
      });
    }
    for (auto& th : fill) th.join();
  }
  char sock[] = "/tmp/kvpool-gpu-bench-XXXXXX";
  if (!mkdtemp(sock)) std::exit(2);
  transfer::SegmentServerOptions so;
  so.shm_socket_path = std::string(sock) + "/store.sock";
  auto server = transfer::SegmentServer::Start(so).value();
  server->Serve({1, region->data(), bytes, region->memfd()});
  transfer::TransferOptions to;
  to.shm_copy_threads = copy_threads;
  transfer::TransferEngine engine(to);
  transfer::SegmentEndpoint ep;
  ep.segment_id = 1;
  ep.store_id = "bench";
  ep.host_id = transfer::LocalHostId();
  ep.shm_socket = server->shm_socket_path();
  ep.size = bytes;
  CHECK_OK(engine.OpenSegment(ep));

  // One registered pinned staging buffer, split in two halves: read one while unpacking the other.
  const uint64_t window_chunks = std::max<uint64_t>(1, (uint64_t{128} << 20) / object);
  const uint64_t half = window_chunks * object;
  std::byte* staging;
  CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&staging), 2 * half, cudaHostAllocDefault));
  CHECK_OK(engine.RegisterMemory(staging, 2 * half));
  DeviceCache cache;
  MakeDeviceCache(cache, layout, num_blocks);
  const auto table = RandomTable(blocks, num_blocks, 11);
  auto packer = NewCudaChunkPacker(0).value();

  auto restore = [&] {
    bool pending = false;
    for (uint64_t c = 0, w = 0; c < chunks; c += window_chunks, ++w) {
      const uint64_t n = std::min(window_chunks, chunks - c);
      std::byte* buf = staging + (w % 2) * half;
      std::vector<transfer::TransferRequest> reads;
      for (uint64_t i = 0; i < n; ++i) {
        reads.push_back({transfer::OpKind::kRead, buf + i * object, 1, (c + i) * object, object});
      }
      CHECK_OK(engine.Transfer(reads, BenchClock::now() + std::chrono::seconds(30)));
      if (pending) CHECK_OK(packer->Wait());  // the unpack that read the other half is done
      CHECK_OK(packer->Unpack({&cache.cache, table, chunk_tokens, c, n, 0, buf}));
      pending = true;
    }
    CHECK_OK(packer->Wait());
  };
  restore();  // warm: maps, first-touch
  const double restore_s = MedianSeconds(5, restore);

  void* dev;
  CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::byte* pinned;
  CHECK_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&pinned), bytes, cudaHostAllocDefault));
  std::memcpy(pinned, region->data(), bytes);
  const double h2d = MedianSeconds(5, [&] { CHECK_CUDA(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice)); });

  // Check: pack the restored cache back on the GPU and compare with the store's bytes.
  CHECK_OK(packer->Pack({&cache.cache, table, chunk_tokens, 0, chunks, 0, static_cast<std::byte*>(dev)}));
  CHECK_OK(packer->Wait());
  CHECK_CUDA(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(pinned, region->data(), bytes) != 0) {
    std::printf("MISMATCH: restored cache differs from the store's bytes\n");
    mismatch = true;
  }
  // Proposed zero-copy variant: the client registers its own mapping of the store's segment
  // with CUDA (cudaHostRegister, once per segment) so the copy engine DMAs straight out of the
  // store's pages — no CPU memcpy into staging. Not in the transfer engine yet.
  CHECK_CUDA(cudaHostRegister(region->data(), bytes, cudaHostRegisterDefault));
  DeviceCache direct;
  MakeDeviceCache(direct, layout, num_blocks);
  const double direct_s = MedianSeconds(5, [&] {
    CHECK_OK(packer->Unpack({&direct.cache, table, chunk_tokens, 0, chunks, 0, reinterpret_cast<std::byte*>(region->data())}));
    CHECK_OK(packer->Wait());
  });
  CHECK_OK(packer->Pack({&direct.cache, table, chunk_tokens, 0, chunks, 0, static_cast<std::byte*>(dev)}));
  CHECK_OK(packer->Wait());
  CHECK_CUDA(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(pinned, region->data(), bytes) != 0) {
    std::printf("MISMATCH: direct-DMA restore differs from the store's bytes\n");
    mismatch = true;
  }
  CHECK_CUDA(cudaHostUnregister(region->data()));

  const double ref = bytes / h2d / 1e9;
  rows.push_back({"restore, direct DMA from registered store", bytes / direct_s / 1e9, ref, 0.80,
                  bytes / direct_s / 1e9 >= 0.80 * ref});
  rows.push_back({"restore via shm copy into pinned staging", bytes / restore_s / 1e9, ref, 0.80,
                  bytes / restore_s / 1e9 >= 0.80 * ref});
  std::printf("restore %.2f GB (%lu chunks of %.2f MB, %d shm copy threads): %.1f ms; pinned H2D memcpy %.1f ms\n",
              bytes / 1e9, static_cast<unsigned long>(chunks), object / 1e6, copy_threads, restore_s * 1e3, h2d * 1e3);
  cudaFree(dev);
  cudaFreeHost(pinned);
  CHECK_OK(engine.UnregisterMemory(staging));
  cudaFreeHost(staging);
  server->Stop();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t tokens = 131072;
  int copy_threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--copy-threads")) copy_threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
  }
  if (CudaDeviceCount() == 0) {
    std::printf("connector_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  // One stage of four of a 48,672 B/token model: MLA 21 layers x 576 B = 12,096 B/token, and a
  // GQA stage with K/V split (8 KV heads x 128 dims x bf16 = 2,048 B each) 3 layers = 12,288 B/token.
  PagedKvLayout mla;
  mla.kind = KvLayoutKind::kLatent;
  mla.num_layers = 21;
  mla.bytes_per_token_per_layer = 576;
  PagedKvLayout gqa;
  gqa.kind = KvLayoutKind::kSplitKv;
  gqa.num_layers = 3;
  gqa.bytes_per_token_per_layer = 4096;
  KernelBench("mla", mla, tokens);
  KernelBench("gqa", gqa, tokens);
  RestoreBench(mla, tokens, copy_threads);

  std::printf("\n%-40s %10s %12s %8s %s\n", "what", "GB/s", "reference", "ratio", "target");
  FILE* out = json ? std::fopen(json, "w") : nullptr;
  if (out) std::fprintf(out, "[\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%-40s %10.1f %12.1f %7.0f%% >=%.0f%% %s\n", r.name.c_str(), r.gbps, r.reference_gbps,
                100 * r.gbps / r.reference_gbps, 100 * r.target, r.ok ? "met" : "MISSED");
    if (out) {
      std::fprintf(out, "  {\"what\": \"%s\", \"gbps\": %.2f, \"reference_gbps\": %.2f, \"target\": %.2f}%s\n",
                   r.name.c_str(), r.gbps, r.reference_gbps, r.target, i + 1 < rows.size() ? "," : "");
    }
  }
  if (out) {
    std::fprintf(out, "]\n");
    std::fclose(out);
  }
  return mismatch ? 1 : 0;
}
