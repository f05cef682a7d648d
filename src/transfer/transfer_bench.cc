// kvpool_transfer_bench: what the transfer engine achieves on this machine, next to the
// ceilings it is measured against (plain memcpy, raw loopback tcp), all in one run.
//
//   kvpool_transfer_bench [--reps N] [--working-set-mib M] [--copy-threads T]
//                         [--connections C] [--io-threads I] [--chunk-kib K]
//                         [--sndbuf-kib B] [--rcvbuf-kib B] [--ucx] [--json] [--verbose]
//                         [--only SUBSTRING]
//
// For each value size (64 KiB, 1 MiB, 8 MiB) one repetition moves a working set of M MiB as
// one batch of M/size requests between a local buffer and a memfd segment served by an
// in-process SegmentServer. Every case runs once per repetition, round-robin (so load from
// other processes hits all alike); figures are medians over N repetitions after a warm-up,
// in GB/s (1e9 bytes/s). Both ends run in this process, so tcp numbers include the server's
// cpu; the raw tcp blaster is measured the same way (sender and receiver threads here).
// --ucx adds the UCX transport, over UCX's tcp on loopback and over its shared-memory
// transports, each against a store (SegmentServer) of its own serving the same memory.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "transfer/segment_server.h"
#include "transfer/memfd_region.h"
#include "transfer/transfer_engine.h"

namespace kvpool::transfer {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int reps = 7;
  uint64_t working_set = 64ull << 20;
  int copy_threads = 2;
  int connections = 4;
  int io_threads = 2;
  uint64_t chunk = 1ull << 20;
  int sndbuf = 0;
  int rcvbuf = 0;
  bool ucx = false;
  bool json = false;
  bool verbose = false;
  std::string only;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> long long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (a == "--reps") f.reps = static_cast<int>(next());
    else if (a == "--working-set-mib") f.working_set = static_cast<uint64_t>(next()) << 20;
    else if (a == "--copy-threads") f.copy_threads = static_cast<int>(next());
    else if (a == "--connections") f.connections = static_cast<int>(next());
    else if (a == "--io-threads") f.io_threads = static_cast<int>(next());
    else if (a == "--chunk-kib") f.chunk = static_cast<uint64_t>(next()) << 10;
    else if (a == "--sndbuf-kib") f.sndbuf = static_cast<int>(next()) << 10;
    else if (a == "--rcvbuf-kib") f.rcvbuf = static_cast<int>(next()) << 10;
    else if (a == "--json") f.json = true;
    else if (a == "--ucx") f.ucx = true;
    else if (a == "--verbose") f.verbose = true;
    else if (a == "--only") {
      if (++i >= argc) std::exit(2);
      f.only = argv[i];
    }
    else {
      std::fprintf(stderr,
                   "usage: %s [--reps N] [--working-set-mib M] [--copy-threads T] [--connections C]"
                   " [--io-threads I] [--chunk-kib K] [--sndbuf-kib B] [--rcvbuf-kib B] [--ucx] [--json] [--verbose] [--only SUBSTRING]\n", argv[0]);
      std::exit(2);
    }
  }
  return f;
}

// memcpy of the same request list, split over `threads` persistent threads (the caller is one).
class PlainCopier {
 public:
  explicit PlainCopier(int threads) : threads_(threads), start_(threads), end_(threads) {
    for (int t = 1; t < threads; ++t) {
      workers_.emplace_back([this, t] {
        while (true) {
          start_.arrive_and_wait();
          if (stop_) return;
          Work(t);
          end_.arrive_and_wait();
        }
      });
    }
  }
  ~PlainCopier() {
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& w : workers_) w.join();
  }
  // Copies `count` pieces of `size` bytes from src to dst.
  void Copy(char* dst, const char* src, uint64_t size, uint64_t count) {
    dst_ = dst;
    src_ = src;
    // Pieces of at most 1 MiB so every thread gets work even for one large value.
    piece_ = std::min<uint64_t>(size, 1 << 20);
    pieces_ = size * count / piece_;
    start_.arrive_and_wait();
    Work(0);
    end_.arrive_and_wait();
  }

 private:
  void Work(int t) {
    for (uint64_t i = t; i < pieces_; i += threads_) std::memcpy(dst_ + i * piece_, src_ + i * piece_, piece_);
  }
  int threads_;
  std::barrier<> start_, end_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stop_{false};
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  uint64_t piece_ = 0, pieces_ = 0;
};

// Raw loopback tcp: `streams` persistent connections, each moving bytes/streams per run with
// plain blocking send/recv from one sender and one receiver thread per stream.
class RawTcpBlaster {
 public:
  RawTcpBlaster(int streams, uint64_t bytes) : per_stream_(bytes / streams) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listener, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    for (int i = 0; i < streams; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM, 0);
      ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      senders_.push_back(c);
      receivers_.push_back(::accept(listener, nullptr, nullptr));
      send_bufs_.emplace_back(kBuf, 'x');
      recv_bufs_.emplace_back(kBuf, 'y');
    }
    ::close(listener);
  }
  ~RawTcpBlaster() {
    for (int fd : senders_) ::close(fd);
    for (int fd : receivers_) ::close(fd);
  }
  uint64_t bytes() const { return per_stream_ * senders_.size(); }

  void Run() {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < senders_.size(); ++i) {
      threads.emplace_back([this, i] {
        for (uint64_t sent = 0; sent < per_stream_;) {
          ssize_t n = ::send(senders_[i], send_bufs_[i].data(), std::min<uint64_t>(kBuf, per_stream_ - sent), 0);
          if (n <= 0) return;
          sent += static_cast<uint64_t>(n);
        }
      });
      threads.emplace_back([this, i] {
        for (uint64_t got = 0; got < per_stream_;) {
          ssize_t n = ::recv(receivers_[i], recv_bufs_[i].data(), std::min<uint64_t>(kBuf, per_stream_ - got), 0);
          if (n <= 0) return;
          got += static_cast<uint64_t>(n);
        }
      });
    }
    for (auto& t : threads) t.join();
  }

 private:
  static constexpr size_t kBuf = 4 << 20;
  uint64_t per_stream_;
  std::vector<int> senders_, receivers_;
  std::vector<std::vector<char>> send_bufs_, recv_bufs_;
};

// Measurements interleaved round-robin, one run of each per repetition, so that load from
// other processes on a shared machine hits every case alike; medians at the end.
class Interleaved {
 public:
  // Returns the case's index.
  // Only cases whose name contains `filter` run; the others report 0.
  explicit Interleaved(std::string filter) : filter_(std::move(filter)) {}
  size_t Add(std::string name, uint64_t bytes, std::function<void()> fn) {
    cases_.push_back({std::move(name), bytes, std::move(fn), {}});
    return cases_.size() - 1;
  }
  void Run(int reps) {
    auto selected = [&](const Case& c) { return c.name.find(filter_) != std::string::npos; };
    for (auto& c : cases_) {
      if (selected(c)) c.fn();  // warm-up
    }
    for (int r = 0; r < reps; ++r) {
      for (auto& c : cases_) {
        if (!selected(c)) continue;
        auto start = Clock::now();
        c.fn();
        double s = std::chrono::duration<double>(Clock::now() - start).count();
        c.gbps.push_back(static_cast<double>(c.bytes) / s / 1e9);
      }
    }
  }
  double Median(size_t i) const {
    std::vector<double> v = cases_[i].gbps;
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  const std::vector<double>& samples(size_t i) const { return cases_[i].gbps; }

 private:
  struct Case {
    std::string name;
    uint64_t bytes;
    std::function<void()> fn;
    std::vector<double> gbps;
  };
  std::string filter_;
  std::vector<Case> cases_;
};

struct Row {
  uint64_t size;
  double memcpy_1t, memcpy_nt, shm_read, shm_write, tcp_read, tcp_write;
  double ucx_tcp_read = 0, ucx_tcp_write = 0, ucx_sm_read = 0, ucx_sm_write = 0;  // with --ucx
};

int Main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  spdlog::set_level(spdlog::level::warn);  // stdout is the results (--json); the stores' start-up lines are noise
  if (flags.ucx && !UcxBuilt()) {
    std::fprintf(stderr, "--ucx: this build has no UCX\n");
    return 2;
  }
  const uint64_t ws = flags.working_set;
  auto segment = MemfdRegion::Create(ws).value();
  auto local = MemfdRegion::Create(ws, "kvpool-bench-local").value();  // pre-faulted like a registered buffer
  FillPattern(segment->data(), 0, ws, 1);

  char dir[] = "/tmp/kvpool-bench-XXXXXX";
  std::string socket_path = std::string(::mkdtemp(dir)) + "/store.sock";
  SegmentServerOptions server_options;
  server_options.shm_socket_path = socket_path;
  server_options.io_threads = flags.io_threads;
  server_options.send_buffer_bytes = flags.sndbuf;
  server_options.receive_buffer_bytes = flags.rcvbuf;
  auto server = std::move(SegmentServer::Start(server_options).value());
  server->Serve({1, segment->data(), ws, segment->memfd()});
  SegmentEndpoint endpoint{1, "bench", LocalHostId(), server->tcp_address(), socket_path, ws};

  // With --ucx: a store of its own per UCX transport, serving the same memory.
  std::vector<std::unique_ptr<SegmentServer>> ucx_servers;
  std::vector<SegmentEndpoint> ucx_endpoints;
  const std::vector<UcxSettings> ucx_settings = {{true, "tcp", "lo"}, {true, "sm", ""}};
  for (const UcxSettings& settings : flags.ucx ? ucx_settings : std::vector<UcxSettings>{}) {
    SegmentServerOptions o = server_options;
    o.shm_socket_path = "";
    o.ucx = settings;
    auto started = SegmentServer::Start(o);
    if (!started.ok()) {
      std::fprintf(stderr, "UCX store (%s): %s\n", settings.transports.c_str(), started.status().ToString().c_str());
      return 1;
    }
    ucx_servers.push_back(std::move(started.value()));
    ucx_servers.back()->Serve({1, segment->data(), ws, -1});
    ucx_endpoints.push_back({1, "bench-ucx", LocalHostId(), ucx_servers.back()->tcp_address(), "", ws});
  }

  auto make_engine = [&](bool shm, const UcxSettings& ucx = {}, const SegmentEndpoint* at = nullptr) {
    TransferOptions o;
    o.allow_shm = shm;
    o.ucx = ucx;
    o.shm_copy_threads = flags.copy_threads;
    o.tcp_connections_per_peer = flags.connections;
    o.tcp_io_threads = flags.io_threads;
    o.tcp_chunk_bytes = flags.chunk;
    o.tcp_send_buffer_bytes = flags.sndbuf;
    o.tcp_receive_buffer_bytes = flags.rcvbuf;
    auto e = std::make_unique<TransferEngine>(o);
    if (!e->OpenSegment(at != nullptr ? *at : endpoint).ok()) std::abort();
    return e;
  };
  auto shm_engine = make_engine(true);
  auto tcp_engine = make_engine(false);
  std::vector<std::unique_ptr<TransferEngine>> ucx_engines;  // over tcp, over sm
  for (size_t i = 0; i < ucx_servers.size(); ++i) ucx_engines.push_back(make_engine(false, ucx_settings[i], &ucx_endpoints[i]));
  bool as_expected = shm_engine->TransportFor(1) == "shm" && tcp_engine->TransportFor(1) == "tcp";
  for (const auto& e : ucx_engines) as_expected = as_expected && e->TransportFor(1) == "ucx";
  if (!as_expected) {
    std::fprintf(stderr, "transports not as expected\n");
    return 1;
  }

  PlainCopier one(1), many(flags.copy_threads);
  RawTcpBlaster raw_one(1, ws), raw_many(flags.connections, ws);
  auto run = [&](TransferEngine& e, const std::vector<TransferRequest>& b) {
    Status s = e.Transfer(b, Clock::now() + std::chrono::seconds(60));
    if (!s.ok()) {
      std::fprintf(stderr, "transfer failed: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  const std::vector<uint64_t> sizes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{8} << 20};
  std::vector<std::vector<TransferRequest>> reads, writes;
  for (uint64_t size : sizes) {
    for (OpKind kind : {OpKind::kRead, OpKind::kWrite}) {
      std::vector<TransferRequest> batch;
      for (uint64_t i = 0; i < ws / size; ++i) batch.push_back({kind, local->data() + i * size, 1, i * size, size});
      (kind == OpKind::kRead ? reads : writes).push_back(std::move(batch));
    }
  }
  Interleaved bench(flags.only);
  struct CaseIds {
    size_t memcpy_1t, memcpy_nt, shm_read, shm_write, tcp_read, tcp_write;
    std::vector<size_t> ucx;  // read, write per UCX engine
  };
  std::vector<CaseIds> ids;
  for (size_t k = 0; k < sizes.size(); ++k) {
    uint64_t size = sizes[k], count = ws / size;
    std::string tag = std::to_string(size >> 10) + "KiB ";
    CaseIds c;
    c.memcpy_1t = bench.Add(tag + "memcpy_1t", ws, [&, size, count] { one.Copy(local->data(), segment->data(), size, count); });
    c.memcpy_nt = bench.Add(tag + "memcpy_nt", ws, [&, size, count] { many.Copy(local->data(), segment->data(), size, count); });
    c.shm_read = bench.Add(tag + "shm_read", ws, [&, k] { run(*shm_engine, reads[k]); });
    c.shm_write = bench.Add(tag + "shm_write", ws, [&, k] { run(*shm_engine, writes[k]); });
    c.tcp_read = bench.Add(tag + "tcp_read", ws, [&, k] { run(*tcp_engine, reads[k]); });
    c.tcp_write = bench.Add(tag + "tcp_write", ws, [&, k] { run(*tcp_engine, writes[k]); });
    for (size_t u = 0; u < ucx_engines.size(); ++u) {
      const std::string name = tag + "ucx_" + ucx_settings[u].transports;
      c.ucx.push_back(bench.Add(name + "_read", ws, [&, k, u] { run(*ucx_engines[u], reads[k]); }));
      c.ucx.push_back(bench.Add(name + "_write", ws, [&, k, u] { run(*ucx_engines[u], writes[k]); }));
    }
    ids.push_back(c);
  }
  size_t raw_1_id = bench.Add("raw_tcp_1", raw_one.bytes(), [&] { raw_one.Run(); });
  size_t raw_n_id = bench.Add("raw_tcp_n", raw_many.bytes(), [&] { raw_many.Run(); });
  bench.Run(flags.reps);
  if (flags.verbose) {
    const char* names[] = {"memcpy1t", "memcpyNt", "shm_rd", "shm_wr", "tcp_rd", "tcp_wr"};
    for (size_t k = 0; k < sizes.size(); ++k) {
      const CaseIds& c = ids[k];
      size_t case_ids[] = {c.memcpy_1t, c.memcpy_nt, c.shm_read, c.shm_write, c.tcp_read, c.tcp_write};
      for (int j = 0; j < 6; ++j) {
        std::fprintf(stderr, "%8llu KiB %-9s", static_cast<unsigned long long>(sizes[k] >> 10), names[j]);
        for (double g : bench.samples(case_ids[j])) std::fprintf(stderr, " %6.2f", g);
        std::fprintf(stderr, "\n");
      }
    }
  }

  std::vector<Row> rows;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const CaseIds& c = ids[k];
    rows.push_back({sizes[k], bench.Median(c.memcpy_1t), bench.Median(c.memcpy_nt), bench.Median(c.shm_read),
                    bench.Median(c.shm_write), bench.Median(c.tcp_read), bench.Median(c.tcp_write)});
    if (!c.ucx.empty()) {
      rows.back().ucx_tcp_read = bench.Median(c.ucx[0]);
      rows.back().ucx_tcp_write = bench.Median(c.ucx[1]);
      rows.back().ucx_sm_read = bench.Median(c.ucx[2]);
      rows.back().ucx_sm_write = bench.Median(c.ucx[3]);
    }
  }
  double raw_1 = bench.Median(raw_1_id), raw_n = bench.Median(raw_n_id);

  if (flags.json) {
    std::printf("{\"config\": {\"reps\": %d, \"working_set_bytes\": %llu, \"copy_threads\": %d, "
                "\"connections\": %d, \"io_threads\": %d, \"chunk_bytes\": %llu, \"cpus\": %u},\n",
                flags.reps, static_cast<unsigned long long>(ws), flags.copy_threads, flags.connections,
                flags.io_threads, static_cast<unsigned long long>(flags.chunk), std::thread::hardware_concurrency());
    std::printf(" \"raw_tcp_gbps\": {\"streams_1\": %.3f, \"streams_%d\": %.3f},\n \"sizes\": [\n", raw_1,
                flags.connections, raw_n);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("  {\"value_bytes\": %llu, \"memcpy_1t_gbps\": %.3f, \"memcpy_%dt_gbps\": %.3f, "
                  "\"shm_read_gbps\": %.3f, \"shm_write_gbps\": %.3f, \"tcp_read_gbps\": %.3f, "
                  "\"tcp_write_gbps\": %.3f",
                  static_cast<unsigned long long>(r.size), r.memcpy_1t, flags.copy_threads, r.memcpy_nt,
                  r.shm_read, r.shm_write, r.tcp_read, r.tcp_write);
      if (flags.ucx) {
        std::printf(", \"ucx_tcp_read_gbps\": %.3f, \"ucx_tcp_write_gbps\": %.3f, \"ucx_sm_read_gbps\": %.3f, "
                    "\"ucx_sm_write_gbps\": %.3f",
                    r.ucx_tcp_read, r.ucx_tcp_write, r.ucx_sm_read, r.ucx_sm_write);
      }
      std::printf("}%s\n", i + 1 < rows.size() ? "," : "");
    }
    std::printf(" ]}\n");
    return 0;
  }
  std::printf("working set %llu MiB per repetition, median of %d, GB/s; copy threads %d, tcp %d conns x %d io threads, chunk %llu KiB\n",
              static_cast<unsigned long long>(ws >> 20), flags.reps, flags.copy_threads, flags.connections,
              flags.io_threads, static_cast<unsigned long long>(flags.chunk >> 10));
  std::printf("%-8s %9s %9s %9s %9s %9s %9s %12s %12s\n", "value", "memcpy1t", "memcpyNt", "shm_rd", "shm_wr",
              "tcp_rd", "tcp_wr", "shm/memcpyN", "tcp/rawN");
  for (const Row& r : rows) {
    std::printf("%-8s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.0f%% %11.0f%%\n",
                r.size >= (1 << 20) ? (std::to_string(r.size >> 20) + "MiB").c_str()
                                    : (std::to_string(r.size >> 10) + "KiB").c_str(),
                r.memcpy_1t, r.memcpy_nt, r.shm_read, r.shm_write, r.tcp_read, r.tcp_write,
                100 * std::min(r.shm_read, r.shm_write) / r.memcpy_nt,
                100 * std::min(r.tcp_read, r.tcp_write) / raw_n);
  }
  std::printf("raw loopback tcp: 1 stream %.2f GB/s, %d streams %.2f GB/s\n", raw_1, flags.connections, raw_n);
  for (const Row& r : rows) {
    if (!flags.ucx) break;
    std::printf("ucx %-6s over tcp: read %.2f write %.2f; over sm: read %.2f write %.2f GB/s\n",
                r.size >= (1 << 20) ? (std::to_string(r.size >> 20) + "MiB").c_str()
                                    : (std::to_string(r.size >> 10) + "KiB").c_str(),
                r.ucx_tcp_read, r.ucx_tcp_write, r.ucx_sm_read, r.ucx_sm_write);
  }
  return 0;
}

}  // namespace
}  // namespace kvpool::transfer

int main(int argc, char** argv) { return kvpool::transfer::Main(argc, argv); }
