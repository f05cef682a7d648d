// handoff_bench: the prefill -> decode KV handoff on GPUs, the design's published example.
//
// One 8,192-token chunk (tokens [8192, 16384) of a request) of PP stage 1 of a 20/20/20/18-layer
// MLA model (576 B per token-layer: 20 x 8,192 x 576 B = 94,371,840 B) moves from that stage's
// paged cache on GPU 0 into TP4+DCP4 decode caches (4 DCP ranks, interleave 1, all 78 layers,
// layer offset 20), all on GPU 1 when there are two GPUs, else on GPU 0. Three ways, one run:
//
//   (a) per-token  one cudaMemcpyPeerAsync per token per layer (163,840 copies of 576 B)
//   (b) pipelined  handoff::HandoffPipeline: gather into 8 MiB pieces on GPU 0, 12 large peer
//                  copies (submitted in batches) into a ring of landing slots on GPU 1, scatter there
//   (c) peer copy  one cudaMemcpyPeerAsync of the same 94 MB contiguous buffer (the wire's speed)
//
// Before timing, (a) and (b) each run once into sentinel-filled decode caches and the caches are
// compared byte for byte with the CPU reference (handoff_copy.h); exit 1 on any mismatch. Times
// are CUDA-event medians after a warm-up: (b) from an event recorded on the decode GPU just
// before the first enqueue to the pipeline's completion event (so the host's enqueue time
// counts); (a) and (c) on the prefill GPU's stream. Targets: (b) >= 80% of (c)'s GB/s, and
// (b) >= 50x faster than (a). (a) warms up on a 16,384-copy sample, then runs in full
// --per-token-repeats times (default 3). Also reported: (b) submitting one copy per piece instead
// of batches, the gather and scatter kernels alone, and (c)'s bytes cut into (b)'s pieces and
// copied without kernels, as separate copies and as one cudaMemcpyBatchAsync (what the
// write-size cap costs, and what batching wins back).
//
// Usage: handoff_bench [--json FILE] [--repeats N] [--per-token-repeats N] [--max-write-bytes B]
//                      [--slots N] [--kernel-blocks N] [--sweep]
// The chunked copy row uses one stream, as the pipeline's copies do.
// --sweep also times (b) for 2/4/8/12 slots x kernel grid caps 0/132 x 2/4/8/16 MiB writes
// (16 MiB: what the 8 MiB cap costs), and the chunked copies (no kernels) on 1-4 streams.
// The summary then names the fastest 8 MiB configuration (row best_8mib).
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
#include "handoff_example.h"
#include "handoff/handoff_copy.h"
#include "handoff/handoff_copy_cuda.h"

using namespace kvpool;
using kvpool::bench::Median;
using kvpool::bench::RandomTable;
using namespace kvpool::handoff;

namespace {

// A paged cache with a host copy (the CPU reference's) and a device copy on `device`.
struct Side {
  int device = 0;
  PagedKvCache host, dev;
  std::vector<std::vector<std::byte>> host_planes;
  std::vector<void*> allocs;
};

void MakeSide(Side& s, const PagedKvLayout& layout, uint64_t num_blocks, int device, uint64_t seed) {
  s.device = device;
  s.host.layout = s.dev.layout = layout;
  s.host.num_blocks = s.dev.num_blocks = num_blocks;
  CHECK_CUDA(cudaSetDevice(device));
  for (uint32_t p = 0; p < layout.num_planes(); ++p) {
    std::vector<std::byte> plane(layout.plane_bytes(num_blocks));
    bench::FillDistinct(plane, seed * 1000 + p);
    void* d;
    CHECK_CUDA(cudaMalloc(&d, plane.size()));
    CHECK_CUDA(cudaMemcpy(d, plane.data(), plane.size(), cudaMemcpyHostToDevice));
    s.allocs.push_back(d);
    s.dev.plane_bases.push_back(static_cast<std::byte*>(d));
    s.host_planes.push_back(std::move(plane));
    s.host.plane_bases.push_back(s.host_planes.back().data());
  }
}

// Device planes <- host planes (the sentinel state before a verified run).
void ResetDevice(Side& s) {
  CHECK_CUDA(cudaSetDevice(s.device));
  for (size_t p = 0; p < s.allocs.size(); ++p) {
    CHECK_CUDA(cudaMemcpy(s.allocs[p], s.host_planes[p].data(), s.host_planes[p].size(), cudaMemcpyHostToDevice));
  }
}

bool SameAsHost(Side& s, const std::vector<std::vector<std::byte>>& want) {
  CHECK_CUDA(cudaSetDevice(s.device));
  std::vector<std::byte> got;
  for (size_t p = 0; p < s.allocs.size(); ++p) {
    got.resize(want[p].size());
    CHECK_CUDA(cudaMemcpy(got.data(), s.allocs[p], got.size(), cudaMemcpyDeviceToHost));
    if (std::memcmp(got.data(), want[p].data(), got.size()) != 0) return false;
  }
  return true;
}

struct Row {
  std::string key;
  std::string what;
  uint64_t writes;
  double ms;
};

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  int repeats = 20, per_token_repeats = 3;
  uint64_t max_write = kDefaultMaxWriteBytes;
  uint32_t slots = HandoffPipelineOptions{}.slots;
  uint32_t kernel_blocks = HandoffPipelineOptions{}.kernel_blocks;
  bool do_sweep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--sweep") {
      do_sweep = true;
      continue;
    }
    if (value == nullptr) {
      std::fprintf(stderr, "handoff_bench: %s needs a value\n", arg.c_str());
      return 2;
    }
    ++i;
    if (arg == "--json") {
      json = value;
    } else if (arg == "--repeats") {
      repeats = std::max(1, std::atoi(value));
    } else if (arg == "--per-token-repeats") {
      per_token_repeats = std::max(1, std::atoi(value));
    } else if (arg == "--max-write-bytes") {
      max_write = std::strtoull(value, nullptr, 10);
    } else if (arg == "--kernel-blocks") {
      kernel_blocks = static_cast<uint32_t>(std::max(0, std::atoi(value)));
    } else if (arg == "--slots") {
      slots = static_cast<uint32_t>(std::max(1, std::atoi(value)));
    } else {
      std::fprintf(stderr, "handoff_bench: unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  const int gpus = HandoffCudaDeviceCount();
  if (gpus == 0) {
    std::printf("handoff_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  const int P = 0, D = gpus > 1 ? 1 : 0;

  const PrefillLayout prefill = bench::ExamplePrefill();
  const DecodeLayout decode = bench::ExampleDecode();
  const uint32_t stage = 1;
  const uint64_t first = bench::kExampleFirstToken, end = bench::kExampleEndToken;
  auto plan_or = PlanHandoff(prefill, decode, first, end, {.max_write_bytes = max_write});
  CHECK_OK(plan_or.status());
  const HandoffPlan& plan = *plan_or;
  const uint64_t bytes = plan.rank_bytes(stage);
  const uint64_t per_token_writes = (end - first) * prefill.stage_layers[stage];

  // Caches: the stage's on P (its table covers [0, end)), four decode ranks on D.
  const DcpTokenMap map = decode.token_map();
  Side pre;
  const uint64_t pre_blocks = end / prefill.block_tokens;
  MakeSide(pre, prefill.RankLayout(stage), pre_blocks + 32, P, 1);
  const auto pre_table = RandomTable(pre_blocks, pre_blocks + 32, 2);
  std::vector<Side> dec(decode.dcp_ranks);
  std::vector<std::vector<BlockId>> dec_tables;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    const uint64_t blocks = (map.CountBelow(d, end) + decode.block_tokens - 1) / decode.block_tokens;
    MakeSide(dec[d], decode.RankLayout(), blocks + 16, D, 10 + d);
    dec_tables.push_back(RandomTable(blocks, blocks + 16, 20 + d));
  }

  // CPU reference: the decode planes after the handoff.
  std::vector<std::vector<std::vector<std::byte>>> want(decode.dcp_ranks);
  {
    std::vector<std::byte> buffer;
    std::vector<PagedKvCache> ref(decode.dcp_ranks);
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      want[d] = dec[d].host_planes;
      ref[d] = dec[d].host;
      for (size_t p = 0; p < want[d].size(); ++p) ref[d].plane_bases[p] = want[d][p].data();
      const PairPlan& pair = plan.pair(stage, d);
      buffer.resize(pair.bytes());
      CHECK_OK(GatherCpu(pair, pre.host, pre_table, buffer.data()));
      CHECK_OK(ScatterCpu(pair, buffer.data(), ref[d], dec_tables[d]));
    }
  }

  auto pre_dev = DeviceKvTable::Upload(pre.dev, pre_table, P);
  CHECK_OK(pre_dev.status());
  std::vector<std::unique_ptr<DeviceKvTable>> dec_dev;
  std::vector<const DeviceKvTable*> dec_ptrs;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    auto t = DeviceKvTable::Upload(dec[d].dev, dec_tables[d], D);
    CHECK_OK(t.status());
    dec_dev.push_back(std::move(*t));
    dec_ptrs.push_back(dec_dev.back().get());
  }
  HandoffPipelineOptions po;
  po.slots = slots;
  po.slot_bytes = max_write;
  po.kernel_blocks = kernel_blocks;
  const uint32_t main_streams = 1;  // the pipeline's copy stream
  auto pipe_or = HandoffPipeline::Create(P, D, po);  // also enables peer access both ways
  CHECK_OK(pipe_or.status());
  HandoffPipeline& pipe = **pipe_or;
  HandoffPipelineOptions unbatched = po;  // the same pipeline submitting one copy per piece
  unbatched.batch_copies = false;
  auto unbatched_or = HandoffPipeline::Create(P, D, unbatched);
  CHECK_OK(unbatched_or.status());

  cudaStream_t ps, ds;
  cudaEvent_t p0, p1, d0, d1;
  CHECK_CUDA(cudaSetDevice(P));
  CHECK_CUDA(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreate(&p0));
  CHECK_CUDA(cudaEventCreate(&p1));
  CHECK_CUDA(cudaSetDevice(D));
  CHECK_CUDA(cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreate(&d0));
  CHECK_CUDA(cudaEventCreate(&d1));  // the pipeline's completion event (timed)

  bool verified = true;
  // (b) once, verified.
  auto run_pipeline = [&](HandoffPipeline& which, double* host_enqueue_ms) {
    CHECK_CUDA(cudaSetDevice(D));
    CHECK_CUDA(cudaEventRecord(d0, ds));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_OK(which.Transfer(plan, stage, **pre_dev, dec_ptrs, d1));
    const auto t1 = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaEventSynchronize(d1));
    if (host_enqueue_ms) *host_enqueue_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, d0, d1));
    return static_cast<double>(ms);
  };
  auto run_pipelined = [&](double* host_enqueue_ms) { return run_pipeline(pipe, host_enqueue_ms); };
  run_pipelined(nullptr);
  CHECK_OK(pipe.Synchronize());
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    if (!SameAsHost(dec[d], want[d])) {
      std::printf("MISMATCH: pipelined handoff, decode rank %u differs from the CPU reference\n", d);
      verified = false;
    }
  }


  // (a) addresses, then once fully, verified.
  struct Copy {
    std::byte* dst;
    const std::byte* src;
  };
  std::vector<Copy> copies;
  copies.reserve(per_token_writes);
  for (uint32_t layer = 0; layer < prefill.stage_layers[stage]; ++layer) {
    for (uint64_t g = first; g < end; ++g) {
      const uint32_t d = map.Owner(g);
      copies.push_back(
          {dec[d].dev.TokenAddress(dec_tables[d], plan.pair(stage, 0).first_layer + layer, 0, map.Local(g)),
           pre.dev.TokenAddress(pre_table, layer, 0, g)});
    }
  }
  auto run_per_token = [&](size_t n) {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p0, ps));
    for (size_t i = 0; i < n; ++i) CHECK_CUDA(cudaMemcpyPeerAsync(copies[i].dst, D, copies[i].src, P, 576, ps));
    CHECK_CUDA(cudaEventRecord(p1, ps));
    CHECK_CUDA(cudaEventSynchronize(p1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p0, p1));
    return static_cast<double>(ms);
  };
  for (auto& s : dec) ResetDevice(s);
  run_per_token(copies.size());
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    if (!SameAsHost(dec[d], want[d])) {
      std::printf("MISMATCH: per-token copies, decode rank %u differs from the CPU reference\n", d);
      verified = false;
    }
  }

  // (c) buffers, with room for the batch row's pieces spaced max_write apart.
  void *src_buf, *dst_buf;
  const uint64_t room = std::max(bytes, plan.rank_writes(stage) * max_write);
  CHECK_CUDA(cudaSetDevice(P));
  CHECK_CUDA(cudaMalloc(&src_buf, room));
  CHECK_CUDA(cudaMemset(src_buf, 0x5a, room));
  CHECK_CUDA(cudaSetDevice(D));
  CHECK_CUDA(cudaMalloc(&dst_buf, room));
  auto run_peer = [&] {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p0, ps));
    CHECK_CUDA(cudaMemcpyPeerAsync(dst_buf, D, src_buf, P, bytes, ps));
    CHECK_CUDA(cudaEventRecord(p1, ps));
    CHECK_CUDA(cudaEventSynchronize(p1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p0, p1));
    return static_cast<double>(ms);
  };
  // The same bytes as plan.rank_writes(stage) plain peer copies of the pipeline's piece sizes,
  // round robin over n streams: what chunking alone costs, without gather or scatter.
  std::vector<size_t> piece_sizes;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    for (const HandoffWrite& w : plan.pair(stage, d).writes) piece_sizes.push_back(w.length);
  }
  // As many streams as the pipeline's copy streams, on the prefill GPU; up to 4 for the sweep.
  const uint32_t max_chunk_streams = std::max(main_streams, 4u);
  std::vector<cudaStream_t> chunk_streams(max_chunk_streams);
  std::vector<cudaEvent_t> chunk_joins(max_chunk_streams);
  for (uint32_t i = 0; i < max_chunk_streams; ++i) {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaStreamCreateWithFlags(&chunk_streams[i], cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&chunk_joins[i], cudaEventDisableTiming));
  }
  auto run_chunked_on = [&](uint32_t n) {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p0, ps));
    uint64_t off = 0;
    for (size_t i = 0; i < piece_sizes.size(); ++i) {
      const uint32_t k = static_cast<uint32_t>(i % n);
      CHECK_CUDA(cudaStreamWaitEvent(chunk_streams[k], p0, 0));
      CHECK_CUDA(cudaMemcpyPeerAsync(static_cast<std::byte*>(dst_buf) + off, D, static_cast<std::byte*>(src_buf) + off,
                                     P, piece_sizes[i], chunk_streams[k]));
      off += piece_sizes[i];
    }
    for (uint32_t k = 0; k < n; ++k) CHECK_CUDA(cudaEventRecord(chunk_joins[k], chunk_streams[k]));
    for (uint32_t k = 0; k < n; ++k) CHECK_CUDA(cudaStreamWaitEvent(ps, chunk_joins[k], 0));
    CHECK_CUDA(cudaEventRecord(p1, ps));
    CHECK_CUDA(cudaEventSynchronize(p1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p0, p1));
    return static_cast<double>(ms);
  };
  auto run_chunked = [&] { return run_chunked_on(main_streams); };
  // The same pieces as one cudaMemcpyBatchAsync, spaced max_write apart. Piece i lands in place
  // n-1-i, so no piece continues the previous one on both sides (nothing for the driver to merge).
  std::vector<void*> batch_dsts;
  std::vector<const void*> batch_srcs;
  const size_t n_pieces = piece_sizes.size();
  for (size_t i = 0; i < n_pieces; ++i) {
    batch_srcs.push_back(static_cast<std::byte*>(src_buf) + i * max_write);
    batch_dsts.push_back(static_cast<std::byte*>(dst_buf) + (n_pieces - 1 - i) * max_write);
  }
  auto run_chunked_batch = [&] {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p0, ps));
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attr_index = 0;
    CHECK_CUDA(cudaMemcpyBatchAsync(batch_dsts.data(), batch_srcs.data(), piece_sizes.data(), n_pieces, &attr,
                                    &attr_index, 1, ps));
    CHECK_CUDA(cudaEventRecord(p1, ps));
    CHECK_CUDA(cudaEventSynchronize(p1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p0, p1));
    return static_cast<double>(ms);
  };
  // Gather and scatter kernels alone (whole pair buffers, device-local), for the breakdown.
  std::vector<void*> gather_bufs, landing_bufs;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    void* g;
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaMalloc(&g, plan.pair(stage, d).bytes()));
    gather_bufs.push_back(g);
    CHECK_CUDA(cudaSetDevice(D));
    CHECK_CUDA(cudaMalloc(&g, plan.pair(stage, d).bytes()));
    landing_bufs.push_back(g);
  }
  auto run_gather = [&] {
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p0, ps));
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      CHECK_OK(GatherCuda(plan.pair(stage, d), **pre_dev, static_cast<std::byte*>(gather_bufs[d]), ps));
    }
    CHECK_CUDA(cudaSetDevice(P));
    CHECK_CUDA(cudaEventRecord(p1, ps));
    CHECK_CUDA(cudaEventSynchronize(p1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, p0, p1));
    return static_cast<double>(ms);
  };
  auto run_scatter = [&] {
    CHECK_CUDA(cudaSetDevice(D));
    CHECK_CUDA(cudaEventRecord(d0, ds));
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      CHECK_OK(ScatterCuda(plan.pair(stage, d), static_cast<std::byte*>(landing_bufs[d]), *dec_dev[d], ds));
    }
    CHECK_CUDA(cudaSetDevice(D));
    CHECK_CUDA(cudaEventRecord(d1, ds));
    CHECK_CUDA(cudaEventSynchronize(d1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, d0, d1));
    return static_cast<double>(ms);
  };

  // Warm-ups, then medians. The per-token warm-up is a 16,384-copy sample.
  run_per_token(std::min<size_t>(copies.size(), 16384));
  run_pipelined(nullptr);
  run_pipeline(**unbatched_or, nullptr);
  run_peer();
  run_gather();
  run_scatter();
  run_chunked();
  run_chunked_batch();
  std::vector<double> a, b, b1, c, enq, g, s, ch, chb;
  for (int i = 0; i < per_token_repeats; ++i) a.push_back(run_per_token(copies.size()));
  for (int i = 0; i < repeats; ++i) {
    double e = 0;
    b.push_back(run_pipelined(&e));
    b1.push_back(run_pipeline(**unbatched_or, nullptr));
    enq.push_back(e);
    c.push_back(run_peer());
    g.push_back(run_gather());
    s.push_back(run_scatter());
    ch.push_back(run_chunked());
    chb.push_back(run_chunked_batch());
  }
  CHECK_OK(pipe.Synchronize());

  // --sweep: the pipelined path for other slot counts and write sizes (not verified again: the
  // same kernels and ordering, only the ring's size and the pieces differ).
  struct SweepRow {
    uint32_t slots, kernel_blocks;
    uint64_t max_write, writes;
    double ms;
  };
  std::vector<SweepRow> sweep;
  // (c) cut into (b)'s pieces on n streams: whether copies in flight together hide the per-copy gap.
  struct ChunkedRow {
    uint32_t streams;
    double ms;
  };
  std::vector<ChunkedRow> chunked_sweep;
  if (do_sweep) {
    auto time_pipeline = [&](const HandoffPlan& sp, const HandoffPipelineOptions& o) {
      auto p2 = HandoffPipeline::Create(P, D, o);
      CHECK_OK(p2.status());
      std::vector<double> t;
      for (int i = 0; i <= repeats; ++i) {  // the first is the warm-up
        CHECK_CUDA(cudaSetDevice(D));
        CHECK_CUDA(cudaEventRecord(d0, ds));
        CHECK_OK((*p2)->Transfer(sp, stage, **pre_dev, dec_ptrs, d1));
        CHECK_CUDA(cudaEventSynchronize(d1));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, d0, d1));
        if (i > 0) t.push_back(ms);
      }
      sweep.push_back({o.slots, o.kernel_blocks, o.slot_bytes, sp.rank_writes(stage), Median(t)});
    };
    for (uint64_t mw : {uint64_t{2} << 20, uint64_t{4} << 20, uint64_t{8} << 20, uint64_t{16} << 20}) {
      auto sp = PlanHandoff(prefill, decode, first, end, {.max_write_bytes = mw});
      CHECK_OK(sp.status());
      for (uint32_t n : {2u, 4u, 8u, 12u})
        for (uint32_t kb : {0u, 132u}) {
          HandoffPipelineOptions o;
          o.slots = n;
          o.slot_bytes = mw;
          o.kernel_blocks = kb;
          time_pipeline(*sp, o);
        }
    }
    for (uint32_t n = 1; n <= 4; ++n) {
      run_chunked_on(n);  // warm-up
      std::vector<double> t;
      for (int i = 0; i < repeats; ++i) t.push_back(run_chunked_on(n));
      chunked_sweep.push_back({n, Median(t)});
    }
  }
  const double a_ms = Median(a), b_ms = Median(b), b1_ms = Median(b1), c_ms = Median(c), enq_ms = Median(enq);
  const double g_ms = Median(g), s_ms = Median(s), ch_ms = Median(ch), chb_ms = Median(chb);
  auto gbps = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
  const double ratio = gbps(b_ms) / gbps(c_ms);
  const double speedup = a_ms / b_ms;

  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, P));
  std::printf("handoff_bench: %s x%d, prefill GPU %d -> decode GPU %d (%s)\n", prop.name, gpus, P, D,
              P == D ? "same GPU" : (pipe.uses_peer_access() ? "peer access" : "pinned-host bounce"));
  std::printf(
      "chunk: tokens [%llu, %llu) of PP stage %u (%u layers x 576 B) -> DCP%u, %.2f MB; %u slots of %.2f MiB, "
      "%u copy stream, %zu copy submissions\n",
      static_cast<unsigned long long>(first), static_cast<unsigned long long>(end), stage, prefill.stage_layers[stage],
      decode.dcp_ranks, bytes / 1e6, slots, max_write / 1048576.0, main_streams,
      HandoffBatchSizes(plan.rank_writes(stage), slots).size());
  std::vector<Row> rows = {
      {"per_token", "(a) one peer copy per token per layer", per_token_writes, a_ms},
      {"pipelined", "(b) gather + large writes + scatter", plan.rank_writes(stage), b_ms},
      {"peer_copy", "(c) plain peer copy, same bytes", 1, c_ms},
      {"pipelined_unbatched", "    (b) with one copy submission per piece", plan.rank_writes(stage), b1_ms},
      {"gather_kernel", "    gather kernels alone (GPU 0)", 0, g_ms},
      {"scatter_kernel", "    scatter kernels alone (decode GPU)", 0, s_ms},
      {"chunked_peer_copy", "    (c) cut into (b)'s pieces, no kernels", plan.rank_writes(stage), ch_ms},
      {"chunked_batch_copy", "    the same pieces as one batch", plan.rank_writes(stage), chb_ms},
  };
  // The fastest swept configuration with the 8 MiB cap (the design's write size).
  const SweepRow* best8 = nullptr;
  for (const SweepRow& r : sweep) {
    if (r.max_write == uint64_t{8} << 20 && (best8 == nullptr || r.ms < best8->ms)) best8 = &r;
  }
  if (best8) {
    rows.push_back({"best_8mib",
                    "(b) best 8 MiB: " + std::to_string(best8->slots) + " slots, " +
                        std::to_string(best8->kernel_blocks) + " kernel blocks",
                    best8->writes, best8->ms});
  }

  std::printf("\n%-42s %10s %12s %10s\n", "what", "writes", "median ms", "GB/s");
  for (const Row& r : rows)
    std::printf("%-42s %10llu %12.3f %10.1f\n", r.what.c_str(), static_cast<unsigned long long>(r.writes), r.ms,
                gbps(r.ms));
  std::printf("\n(b) host enqueue time (median): %.3f ms\n", enq_ms);
  std::printf("(b)/(c) GB/s ratio: %.2f (target >= 0.80) %s\n", ratio, ratio >= 0.8 ? "met" : "MISSED");
  std::printf("(a)/(b) speedup:    %.1fx (target >= 50x) %s\n", speedup, speedup >= 50 ? "met" : "MISSED");
  if (best8) {
    const double best_ratio = gbps(best8->ms) / gbps(c_ms);
    std::printf("best 8 MiB (sweep): %u slots, kernel blocks %u: (b)/(c) %.2f (target >= 0.80) %s\n", best8->slots,
                best8->kernel_blocks, best_ratio, best_ratio >= 0.8 ? "met" : "MISSED");
  }

  std::printf("result vs CPU reference: %s\n", verified ? "bytes equal" : "MISMATCH");
  if (!sweep.empty()) {
    std::printf("\nsweep of (b): %6s %7s %10s %8s %10s %8s %s\n", "slots", "blocks", "max write", "writes",
                "median ms", "GB/s", "vs (c)");
    for (const SweepRow& r : sweep) {
      std::printf("              %6u %7u %6.0f MiB %8llu %10.3f %8.1f %.2f\n", r.slots, r.kernel_blocks, r.max_write / 1048576.0, static_cast<unsigned long long>(r.writes), r.ms, gbps(r.ms),
                  gbps(r.ms) / gbps(c_ms));
    }
    std::printf("\nsweep of (c) cut into (b)'s %llu pieces, no kernels: %7s %10s %8s %s\n",
                static_cast<unsigned long long>(piece_sizes.size()), "streams", "median ms", "GB/s", "vs (c)");
    for (const ChunkedRow& r : chunked_sweep) {
      std::printf("%52s %7u %10.3f %8.1f %.2f\n", "", r.streams, r.ms, gbps(r.ms), gbps(r.ms) / gbps(c_ms));
    }
  }

  if (json) {
    FILE* out = std::fopen(json, "w");
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 2;
    }
    std::fprintf(out,
                 "{\n  \"gpu\": \"%s\", \"gpus\": %d, \"prefill_gpu\": %d, \"decode_gpu\": %d, \"peer_access\": %s,\n",
                 prop.name, gpus, P, D, pipe.uses_peer_access() ? "true" : "false");
    std::fprintf(
        out,
        "  \"tokens\": %llu, \"layers\": %u, \"bytes_per_token_layer\": 576, \"dcp_ranks\": %u, \"bytes\": %llu,\n",
        static_cast<unsigned long long>(end - first), prefill.stage_layers[stage], decode.dcp_ranks,
        static_cast<unsigned long long>(bytes));
    std::fprintf(out,
                 "  \"max_write_bytes\": %llu, \"slots\": %u, \"copy_streams\": %u, \"repeats\": %d, "
                 "\"per_token_repeats\": %d,\n",
                 static_cast<unsigned long long>(max_write), slots, main_streams, repeats, per_token_repeats);
    for (const Row& r : rows) {
      std::fprintf(out, "  \"%s\": {\"writes\": %llu, \"median_ms\": %.4f, \"gbps\": %.2f},\n", r.key.c_str(),
                   static_cast<unsigned long long>(r.writes), r.ms, gbps(r.ms));
    }
    if (best8) {
      std::fprintf(out,
                   "  \"best_8mib_config\": {\"slots\": %u, \"kernel_blocks\": %u, \"ratio_vs_peer\": %.3f},\n",
                   best8->slots, best8->kernel_blocks, gbps(best8->ms) / gbps(c_ms));
    }
    std::fprintf(out, "  \"pipelined_host_enqueue_ms\": %.4f,\n", enq_ms);
    std::fprintf(out, "  \"ratio_pipelined_vs_peer\": %.3f, \"target_ratio\": 0.8,\n", ratio);
    std::fprintf(out, "  \"speedup_vs_per_token\": %.1f, \"target_speedup\": 50,\n", speedup);

    std::fprintf(out, "  \"sweep\": [");
    for (size_t i = 0; i < sweep.size(); ++i) {
      std::fprintf(out,
                   "%s\n    {\"slots\": %u, \"kernel_blocks\": %u, \"max_write_bytes\": %llu, "
                   "\"writes\": %llu, \"median_ms\": %.4f, \"gbps\": %.2f}",
                   i ? "," : "", sweep[i].slots, sweep[i].kernel_blocks,
                   static_cast<unsigned long long>(sweep[i].max_write),
                   static_cast<unsigned long long>(sweep[i].writes), sweep[i].ms, gbps(sweep[i].ms));
    }
    std::fprintf(out, "],\n");
    std::fprintf(out, "  \"chunked_sweep\": [");
    for (size_t i = 0; i < chunked_sweep.size(); ++i) {
      std::fprintf(out, "%s\n    {\"streams\": %u, \"writes\": %llu, \"median_ms\": %.4f, \"gbps\": %.2f}", i ? "," : "",
                   chunked_sweep[i].streams, static_cast<unsigned long long>(piece_sizes.size()), chunked_sweep[i].ms,
                   gbps(chunked_sweep[i].ms));
    }
    std::fprintf(out, "],\n");
    std::fprintf(out, "  \"verified\": %s\n}\n", verified ? "true" : "false");
    std::fclose(out);
  }
  for (void* p : gather_bufs) cudaFree(p);
  for (void* p : landing_bufs) cudaFree(p);
  cudaSetDevice(P);
  cudaFree(src_buf);
  cudaSetDevice(D);
  cudaFree(dst_buf);
  for (auto& sd : dec) {
    cudaSetDevice(sd.device);
    for (void* p : sd.allocs) cudaFree(p);
  }
  cudaSetDevice(P);
  for (void* p : pre.allocs) cudaFree(p);
  return verified ? 0 : 1;
}
