// handoff_network_bench: the cross-process / cross-host handoff (HandoffSender ->
// HandoffReceiver over real sockets) on the design's published chunk, against the transfer
// engine writing the same bytes in the same write size into a served segment, in one run.
//
// The chunk: tokens [8192, 16384) of a request, all four PP stages of a 20/20/20/18-layer MLA
// model (576 B per token-layer) into TP4+DCP4 decode caches (4 ranks, interleave 1, 78 layers):
// 4 x ~94 MB = 368 MB, host memory on both sides. Per transport (shm: same host; tcp: what
// another host uses, here over loopback):
//   handoff   four sender threads (one per stage, connected beforehand) each Send their part:
//             gather a piece of <= 8 MiB, wait for a landing slot, write it, announce it with its
//             checksum; the receiver verifies and scatters. Timed from the first Send to Wait
//             returning ready.
//   writes    four threads, each its own TransferEngine, writing as many bytes in the same
//             piece sizes into a 64 MiB served segment (no gather, slots, checksums or scatter):
//             what the transport itself does with those writes.
// The handoff's result is compared byte for byte with the CPU reference (GatherCpu/ScatterCpu)
// before timing; exit 1 on a mismatch. Medians of --reps (default 5) after a warm-up; the two
// rows of a transport alternate, so load on the machine hits both.
//
// Usage: kvpool_handoff_network_bench [--reps N] [--transport shm|tcp|both] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "handoff_example.h"
#include "handoff/handoff_copy.h"
#include "handoff/handoff_receiver.h"
#include "handoff/handoff_sender.h"
#include "transfer/memfd_region.h"
#include "transfer/segment_server.h"
#include "transfer/transfer_engine.h"

namespace kvpool::handoff {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "handoff_network_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(2);
}

// A paged cache over host memory filled with distinct bytes.
struct HostCache {
  PagedKvCache cache;
  std::vector<std::vector<std::byte>> planes;
  HostCache(const PagedKvLayout& layout, uint64_t num_blocks, uint64_t seed) {
    cache.layout = layout;
    cache.num_blocks = num_blocks;
    for (uint32_t p = 0; p < layout.num_planes(); ++p) {
      std::vector<std::byte>& plane = planes.emplace_back(layout.plane_bytes(num_blocks));
      bench::FillDistinct(plane, seed * 1000 + p);
      cache.plane_bases.push_back(plane.data());
    }
  }
};

// Block ids 0..blocks-1 in a fixed scattered order (a stride coprime to the count).
std::vector<BlockId> ScatteredTable(uint64_t blocks) {
  std::vector<BlockId> t(blocks);
  uint64_t stride = 7;
  while (blocks % stride == 0) stride += 2;
  for (uint64_t i = 0; i < blocks; ++i) t[i] = static_cast<BlockId>((i * stride) % blocks);
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string transport;
  double handoff_s = 0, writes_s = 0;
};

int Main(int argc, char** argv) {
  int reps = 5;
  std::string only = "both";
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: %s [--reps N] [--transport shm|tcp|both] [--json FILE]\n", argv[0]);
      return 2;
    }
    const char* value = argv[++i];
    if (arg == "--reps") {
      reps = std::max(1, std::atoi(value));
    } else if (arg == "--transport") {
      only = value;
    } else if (arg == "--json") {
      json = value;
    } else {
      std::fprintf(stderr, "handoff_network_bench: unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  if (only != "shm" && only != "tcp" && only != "both") {
    std::fprintf(stderr, "handoff_network_bench: --transport is shm, tcp or both, not %s\n", only.c_str());
    return 2;
  }

  const PrefillLayout prefill = bench::ExamplePrefill();
  const DecodeLayout decode = bench::ExampleDecode();
  const uint64_t first = bench::kExampleFirstToken, end = bench::kExampleEndToken;
  const uint32_t stages = prefill.num_ranks();
  auto plan = PlanHandoff(prefill, decode, first, end);
  if (!plan.ok()) Die("plan", plan.status());

  std::vector<std::unique_ptr<HostCache>> pre, dec;
  std::vector<std::vector<BlockId>> pre_tables, dec_tables;
  for (uint32_t p = 0; p < stages; ++p) {
    pre_tables.push_back(ScatteredTable(end / prefill.block_tokens));
    pre.push_back(std::make_unique<HostCache>(prefill.RankLayout(p), pre_tables.back().size(), 1 + p));
  }
  const DcpTokenMap map = decode.token_map();
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    dec_tables.push_back(ScatteredTable((map.CountBelow(d, end) + decode.block_tokens - 1) / decode.block_tokens));
    dec.push_back(std::make_unique<HostCache>(decode.RankLayout(), dec_tables.back().size(), 10 + d));
  }
  // The CPU reference: the decode planes after the handoff.
  std::vector<std::vector<std::vector<std::byte>>> want;
  {
    std::vector<std::byte> buffer;
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      want.push_back(dec[d]->planes);
      PagedKvCache ref = dec[d]->cache;
      for (size_t i = 0; i < ref.plane_bases.size(); ++i) ref.plane_bases[i] = want[d][i].data();
      for (uint32_t p = 0; p < stages; ++p) {
        const PairPlan& pair = plan->pair(p, d);
        buffer.resize(pair.bytes());
        if (Status s = GatherCpu(pair, pre[p]->cache, pre_tables[p], buffer.data()); !s.ok()) Die("gather", s);
        if (Status s = ScatterCpu(pair, buffer.data(), ref, dec_tables[d]); !s.ok()) Die("scatter", s);
      }
    }
  }
  uint64_t bytes = 0;
  std::vector<std::vector<uint64_t>> piece_sizes(stages);  // per stage, its writes in send order
  for (uint32_t p = 0; p < stages; ++p) {
    bytes += plan->rank_bytes(p);
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      for (const HandoffWrite& w : plan->pair(p, d).writes) piece_sizes[p].push_back(w.length);
    }
  }
  std::vector<DecodeTarget> targets;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) targets.push_back({&dec[d]->cache, dec_tables[d]});

  // The writes' destination: a 64 MiB served segment (the receiver's default landing size).
  const uint64_t segment_bytes = uint64_t{64} << 20;
  auto segment = transfer::MemfdRegion::Create(segment_bytes, "kvpool-bench-landing");
  if (!segment.ok()) Die("segment", segment.status());
  char dir[] = "/tmp/kvpool-handoff-bench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) Die("mkdtemp", Internal("mkdtemp failed"));
  const std::string socket_path = std::string(dir) + "/segment.sock";
  transfer::SegmentServerOptions server_options;
  server_options.shm_socket_path = socket_path;
  auto server = transfer::SegmentServer::Start(server_options);
  if (!server.ok()) Die("segment server", server.status());
  (*server)->Serve({1, (*segment)->data(), segment_bytes, (*segment)->memfd()});
  // Each thread's source: its stage's largest piece, written again and again (sources stay warm
  // as the handoff's gather buffers do).
  std::vector<std::vector<std::byte>> sources(stages, std::vector<std::byte>(uint64_t{8} << 20, std::byte{0x5a}));

  bool verified = true;
  std::vector<Row> rows;
  for (const std::string transport : {"shm", "tcp"}) {
    if (only != "both" && only != transport) continue;
    const bool tcp = transport == "tcp";
    HandoffReceiverOptions ro;
    if (tcp) ro.shm_socket_dir = "";  // the receiver offers no shm: senders use tcp, as from another host
    auto receiver = HandoffReceiver::Start(prefill, decode, ro);
    if (!receiver.ok()) Die("receiver", receiver.status());
    std::vector<std::unique_ptr<HandoffSender>> senders;
    for (uint32_t p = 0; p < stages; ++p) {
      auto s = HandoffSender::Connect((*receiver)->address(), prefill, decode, p);
      if (!s.ok()) Die("connect", s.status());
      if ((*s)->transport() != transport) Die("transport", Internal("sender uses " + (*s)->transport()));
      senders.push_back(std::move(*s));
    }
    std::vector<std::unique_ptr<transfer::TransferEngine>> engines;
    for (uint32_t p = 0; p < stages; ++p) {
      transfer::TransferOptions o;
      o.allow_shm = !tcp;
      engines.push_back(std::make_unique<transfer::TransferEngine>(o));
      const transfer::SegmentEndpoint endpoint{1, "bench", transfer::LocalHostId(), (*server)->tcp_address(),
                                               socket_path, segment_bytes};
      if (Status s = engines.back()->OpenSegment(endpoint); !s.ok()) Die("open segment", s);
      if (engines.back()->TransportFor(1) != transport) Die("transport", Internal("engine does not use " + transport));
    }

    uint64_t next_id = 1;
    auto run_handoff = [&] {
      const uint64_t id = next_id++;
      if (Status s = (*receiver)->Expect(id, first, end, targets); !s.ok()) Die("expect", s);
      const auto t0 = Clock::now();
      std::vector<Status> results(stages);
      std::vector<std::thread> threads;
      for (uint32_t p = 0; p < stages; ++p) {
        threads.emplace_back([&, p] {
          results[p] = senders[p]->Send(id, first, end, pre[p]->cache, pre_tables[p], Clock::now() + 60s);
        });
      }
      for (auto& t : threads) t.join();
      for (const Status& s : results) {
        if (!s.ok()) Die("send", s);
      }
      if (Status s = (*receiver)->Wait(id, Clock::now() + 60s); !s.ok()) Die("wait", s);
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    auto run_writes = [&] {
      const auto t0 = Clock::now();
      std::vector<Status> results(stages);
      std::vector<std::thread> threads;
      for (uint32_t p = 0; p < stages; ++p) {
        threads.emplace_back([&, p] {
          // Thread p writes into its quarter of the segment, piece after piece, as a sender does.
          const uint64_t region = segment_bytes / stages;
          for (uint64_t size : piece_sizes[p]) {
            const transfer::TransferRequest w{transfer::OpKind::kWrite, sources[p].data(), 1, p * region, size};
            results[p] = engines[p]->Transfer({&w, 1}, Clock::now() + 60s);
            if (!results[p].ok()) return;
          }
        });
      }
      for (auto& t : threads) t.join();
      for (const Status& s : results) {
        if (!s.ok()) Die("write", s);
      }
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };

    run_handoff();  // warm-up, then the check against the CPU reference
    for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
      if (dec[d]->planes != want[d]) {
        std::printf("MISMATCH: %s handoff, decode rank %u differs from the CPU reference\n", transport.c_str(), d);
        verified = false;
      }
    }
    run_writes();
    std::vector<double> h, w;
    for (int r = 0; r < reps; ++r) {
      h.push_back(run_handoff());
      w.push_back(run_writes());
    }
    rows.push_back({transport, Median(h), Median(w)});
  }
  (*server)->Stop();
  ::unlink(socket_path.c_str());
  ::rmdir(dir);

  auto gbps = [&](double s) { return bytes / s / 1e9; };
  std::printf("handoff_network_bench: tokens [%llu, %llu), PP4 (20/20/20/18 layers x 576 B) -> DCP4, %.1f MB in "
              "%llu writes of <= 8 MiB; %d reps, medians\n\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(end), bytes / 1e6,
              static_cast<unsigned long long>(plan->total_writes()), reps);
  std::printf("%-10s %14s %12s %14s %12s %10s\n", "transport", "handoff ms", "GB/s", "writes ms", "GB/s",
              "handoff/writes");
  for (const Row& r : rows) {
    std::printf("%-10s %14.1f %12.2f %14.1f %12.2f %10.2f\n", r.transport.c_str(), r.handoff_s * 1e3,
                gbps(r.handoff_s), r.writes_s * 1e3, gbps(r.writes_s), gbps(r.handoff_s) / gbps(r.writes_s));
  }
  std::printf("\nresult vs CPU reference: %s\n", verified ? "bytes equal" : "MISMATCH");
  if (json) {
    FILE* out = std::fopen(json, "w");
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 2;
    }
    std::fprintf(out, "{\"bytes\": %llu, \"writes\": %llu, \"reps\": %d, \"verified\": %s, \"rows\": [",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(plan->total_writes()), reps,
                 verified ? "true" : "false");
    for (size_t i = 0; i < rows.size(); ++i) {
      std::fprintf(out,
                   "%s\n  {\"transport\": \"%s\", \"handoff_ms\": %.2f, \"handoff_gbps\": %.3f, \"writes_ms\": %.2f, "
                   "\"writes_gbps\": %.3f, \"ratio\": %.3f}",
                   i ? "," : "", rows[i].transport.c_str(), rows[i].handoff_s * 1e3, gbps(rows[i].handoff_s),
                   rows[i].writes_s * 1e3, gbps(rows[i].writes_s), gbps(rows[i].handoff_s) / gbps(rows[i].writes_s));
    }
    std::fprintf(out, "\n]}\n");
    std::fclose(out);
  }
  return verified ? 0 : 1;
}

}  // namespace
}  // namespace kvpool::handoff

int main(int argc, char** argv) { return kvpool::handoff::Main(argc, argv); }
