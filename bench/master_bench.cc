// kvpool_master_bench: the master's control plane, and how it holds a large pool.
//
// The rpc phases start a MasterServer on 127.0.0.1:0, mount two segments (endpoint records
// only; no store runs), put --resident objects in-process (keys shaped like the connector's:
// "<namespace>/<chunk>/s<stage>", 52 bytes, one eviction group per chunk of --group-size
// stages, or none), measure the resident memory they take, then with --threads client
// threads (each with its own channel) measure over loopback gRPC:
//   exists  BatchExists keys/s, batches of --exists-batch resident keys
//   get     BatchGetReplicas keys/s, batches of --exists-batch resident keys
//   put     BatchPutStart + BatchPutEnd objects/s, batches of --put-batch fresh keys
// The in-process phases build their own pools (PoolMetadata, no gRPC):
//   evict   the cost of one eviction pass of --evict-units units at each of --evict-pools pool
//           sizes: a pass's cost should follow what it evicts, not the pool
//   rebuild RejoinSegment of one segment's --rebuild-objects index entries (a restarted
//           master taking a store's segment back)
//
//   kvpool_master_bench --threads 4 --seconds 3 [--json]
//   kvpool_master_bench --resident 10000000 --phases exists,get --repeats 3 --json
//   kvpool_master_bench --phases evict,rebuild --evict-pools 1000000,10000000 --json
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"
#include "proto/lookup_reply.h"
#include "proto/master.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvpool::master::PoolMetadata;
using kvpool::proto::Master;

struct BenchOptions {
  int threads = 4;
  double seconds = 3;
  int repeats = 1;
  uint64_t resident = 200000;
  int group_size = 0;
  int preload_threads = 2;
  int exists_batch = 1000;
  int put_batch = 128;
  uint64_t value_bytes = 4096;
  std::vector<uint64_t> evict_pools = {100000, 1000000};
  uint64_t evict_units = 1000;
  int evict_passes = 9;
  uint64_t rebuild_objects = 1000000;
  int rebuild_runs = 3;
  std::string phases = "exists,put";
  bool json = false;

  bool Runs(std::string_view phase) const { return phases.find(phase) != std::string::npos; }
};

struct PhaseResult {
  std::string name;
  std::string unit;
  int batch = 0;
  uint64_t items = 0;
  uint64_t calls = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t errors = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(items) / seconds : 0; }
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Resident set size of this process, from /proc/self/statm.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The connector's names (connector/chunk_keys.h): object i is stage i % G of chunk i / G.
uint64_t Mix(uint64_t x) {  // splitmix64: chunk hashes that look like hashes
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}
constexpr uint64_t kNamespace = 0x5eed0f00dcafe123;
std::string ChunkGroupName(uint64_t chunk) {
  return fmt::format("{:016x}/{:016x}{:016x}", kNamespace, Mix(chunk), Mix(~chunk));
}
std::string ObjectKey(uint64_t i, int group_size) {
  const uint64_t per_chunk = group_size > 0 ? group_size : 1;
  return fmt::format("{}/s{}", ChunkGroupName(i / per_chunk), i % per_chunk);
}
std::string GroupOf(uint64_t i, int group_size) {
  return group_size > 0 ? ChunkGroupName(i / group_size) : std::string();
}

std::unique_ptr<Master::Stub> NewStub(const std::string& address, int channel_index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  // Distinct arguments give each thread its own TCP connection instead of a shared one.
  args.SetInt("kvpool.bench.channel", channel_index);
  return Master::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

std::string KeyName(std::string_view prefix, uint64_t i) { return fmt::format("{}{:012}", prefix, i); }

kvpool::master::SegmentInfo SegmentRecord(int index, uint64_t size) {
  kvpool::master::SegmentInfo info;
  info.store_id = fmt::format("bench-store-{}", index);
  info.host_id = "bench-host";
  info.tcp_address = "127.0.0.1:1";
  info.size = size;
  return info;
}

// Puts objects [0, count) in-process, batches of 1,000 over `threads` threads; `after_batch`
// runs after each batch (the eviction phase moves its clock there). False on any error.
template <typename AfterBatch>
bool Preload(PoolMetadata& pool, uint64_t count, const BenchOptions& o, AfterBatch after_batch) {
  constexpr uint64_t kBatch = 1000;
  std::atomic<uint64_t> next_batch{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    std::vector<std::string> keys, groups;
    std::vector<kvpool::master::PutStartItem> items;
    std::vector<std::string_view> views;
    for (uint64_t b; (b = next_batch.fetch_add(1)) * kBatch < count && !failed;) {
      keys.clear();
      groups.clear();
      for (uint64_t i = b * kBatch; i < std::min(count, (b + 1) * kBatch); ++i) {
        keys.push_back(ObjectKey(i, o.group_size));
        groups.push_back(GroupOf(i, o.group_size));
      }
      items.clear();
      views.clear();
      for (size_t k = 0; k < keys.size(); ++k) {
        items.push_back({keys[k], o.value_bytes, groups[k]});
        views.push_back(keys[k]);
      }
      auto started = pool.BatchPutStart(items, {});
      auto ended = pool.BatchPutEnd(views);
      for (size_t k = 0; k < keys.size(); ++k) {
        if (!started.results[k].status.ok() || !ended[k].ok()) {
          std::fprintf(stderr, "preload of %s failed: %s %s\n", keys[k].c_str(),
                       started.results[k].status.ToString().c_str(), ended[k].ToString().c_str());
          failed = true;
          break;
        }
      }
      after_batch();
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(1, o.preload_threads); ++t) workers.emplace_back(worker);
  for (auto& w : workers) w.join();
  return !failed;
}

struct ResidentPool {
  uint64_t objects = 0;
  uint64_t rss_before = 0, rss_after = 0;
  double seconds = 0;
  double bytes_per_object() const {
    return objects ? static_cast<double>(rss_after - rss_before) / static_cast<double>(objects) : 0;
  }
};

// Runs `call` on every thread until the deadline; `call` returns items done (0 on error).
template <typename Call>
PhaseResult RunPhase(const BenchOptions& o, std::string name, std::string unit, int batch,
                     std::vector<std::unique_ptr<Master::Stub>>& stubs, Call call) {
  std::vector<std::vector<double>> latencies(o.threads);
  std::vector<uint64_t> items(o.threads, 0), errors(o.threads, 0);
  std::atomic<bool> go{false};
  const auto duration = std::chrono::duration<double>(o.seconds);
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      latencies[t].reserve(1 << 16);
      for (uint64_t round = 0;; ++round) {
        auto before = Clock::now();
        if (before - start >= duration) break;
        uint64_t done = call(t, round, *stubs[t]);
        auto after = Clock::now();
        latencies[t].push_back(std::chrono::duration<double, std::micro>(after - before).count());
        if (done == 0) ++errors[t];
        items[t] += done;
      }
    });
  }
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  PhaseResult r;
  r.name = std::move(name);
  r.unit = std::move(unit);
  r.batch = batch;
  r.seconds = SecondsSince(start);
  std::vector<double> all;
  for (int t = 0; t < o.threads; ++t) {
    r.items += items[t];
    r.errors += errors[t];
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
  }
  r.calls = all.size();
  if (!all.empty()) {
    std::sort(all.begin(), all.end());
    r.p50_us = all[all.size() / 2];
    r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return r;
}

void ReportFirst(const char* call, const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] { std::fprintf(stderr, "%s: %s\n", call, message.c_str()); });
}

// exists and get: each thread cycles through a few prebuilt requests of random resident keys.
std::vector<PhaseResult> RunLookupPhases(const BenchOptions& o, uint64_t resident,
                                         std::vector<std::unique_ptr<Master::Stub>>& stubs) {
  constexpr int kRequestsPerThread = 8;
  std::vector<std::vector<kvpool::proto::BatchKeysRequest>> exists_requests(o.threads);
  std::vector<std::vector<kvpool::proto::BatchGetReplicasRequest>> get_requests(o.threads);
  std::mt19937_64 rng(1);
  for (int t = 0; t < o.threads; ++t) {
    exists_requests[t].resize(kRequestsPerThread);
    get_requests[t].resize(kRequestsPerThread);
    for (int r = 0; r < kRequestsPerThread; ++r) {
      for (int i = 0; i < o.exists_batch; ++i) {
        const std::string key = ObjectKey(rng() % resident, o.group_size);
        exists_requests[t][r].add_keys(key);
        get_requests[t][r].add_keys(key);
      }
    }
  }
  std::vector<PhaseResult> results;
  for (int rep = 0; rep < o.repeats; ++rep) {
    if (o.Runs("exists")) {
      results.push_back(RunPhase(o, "BatchExists", "keys/s", o.exists_batch, stubs,
                                 [&](int t, uint64_t round, Master::Stub& stub) -> uint64_t {
        grpc::ClientContext context;
        kvpool::proto::BatchExistsReply reply;
        const auto& request = exists_requests[t][round % kRequestsPerThread];
        if (!stub.BatchExists(&context, request, &reply).ok()) return 0;
        // Every key is resident: anything else is a bug, not a rate.
        if (std::count(reply.exists().begin(), reply.exists().end(), 1) != request.keys_size()) return 0;
        return static_cast<uint64_t>(request.keys_size());
      }));
    }
    if (o.Runs("get")) {
      results.push_back(RunPhase(o, "BatchGetReplicas", "keys/s", o.exists_batch, stubs,
                                 [&](int t, uint64_t round, Master::Stub& stub) -> uint64_t {
        grpc::ClientContext context;
        kvpool::proto::BatchGetReplicasReply reply;
        const auto& request = get_requests[t][round % kRequestsPerThread];
        if (!stub.BatchGetReplicas(&context, request, &reply).ok()) return 0;
        // Read as the client reads it: the reply's arrays checked, then one entry per key.
        auto entries = kvpool::ReadLookupReply(reply, static_cast<size_t>(request.keys_size()));
        if (!entries.ok()) {
          ReportFirst("BatchGetReplicas", entries.status().message());
          return 0;
        }
        for (const kvpool::LookupEntry& e : *entries) {
          if (e.code != kvpool::proto::OK) {
            ReportFirst("BatchGetReplicas", std::string(e.message));
            return 0;
          }
        }
        return static_cast<uint64_t>(request.keys_size());
      }));
    }
  }
  return results;
}

// put: fresh keys per batch; start then end.
PhaseResult RunPutPhase(const BenchOptions& o, std::vector<std::unique_ptr<Master::Stub>>& stubs) {
  return RunPhase(o, "BatchPutStart+End", "objects/s", o.put_batch, stubs,
                  [&](int t, uint64_t round, Master::Stub& stub) -> uint64_t {
    kvpool::proto::BatchPutStartRequest start;
    kvpool::proto::BatchKeysRequest end;
    start.mutable_items()->Reserve(o.put_batch);
    end.mutable_keys()->Reserve(o.put_batch);
    const std::string prefix = fmt::format("put/{}/", t);
    for (int i = 0; i < o.put_batch; ++i) {
      auto* item = start.add_items();
      item->set_key(KeyName(prefix, round * o.put_batch + i));
      item->set_length(o.value_bytes);
      *end.add_keys() = item->key();
    }
    grpc::ClientContext c1, c2;
    kvpool::proto::BatchPutStartReply started;
    kvpool::proto::BatchKeysReply ended;
    if (!stub.BatchPutStart(&c1, start, &started).ok()) return 0;
    for (const auto& r : started.results()) {
      if (r.code() != kvpool::proto::OK) {
        ReportFirst("BatchPutStart", r.message());
        return 0;
      }
    }
    if (!stub.BatchPutEnd(&c2, end, &ended).ok()) return 0;
    for (const auto& r : ended.results()) {
      if (r.code() != kvpool::proto::OK) {
        ReportFirst("BatchPutEnd", r.message());
        return 0;
      }
    }
    return static_cast<uint64_t>(o.put_batch);
  });
}

struct RpcRun {
  bool ok = false;
  ResidentPool resident;
  std::vector<PhaseResult> phases;
};

// The rpc phases: a master on loopback holding --resident objects.
RpcRun RunRpcPhases(const BenchOptions& o) {
  RpcRun run;
  kvpool::master::MasterOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.heartbeat_ttl_ms = 24 * 3600 * 1000;  // no store heartbeats the bench's segments
  auto server = kvpool::master::MasterServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start master: %s\n", server.status().ToString().c_str());
    return run;
  }
  std::vector<std::unique_ptr<Master::Stub>> stubs;
  for (int t = 0; t < o.threads; ++t) stubs.push_back(NewStub((*server)->address(), t));
  const std::shared_ptr<PoolMetadata> pool_holder = (*server)->pool();  // a lone master always has one
  PoolMetadata& pool = *pool_holder;

  // Two segments, only records, each large enough for every resident object (no eviction).
  const uint64_t segment_bytes = std::max<uint64_t>(uint64_t{64} << 30, o.resident * o.value_bytes);
  for (int s = 0; s < 2; ++s) {
    if (!pool.MountSegment(SegmentRecord(s, segment_bytes)).ok()) {
      std::fprintf(stderr, "MountSegment failed\n");
      return run;
    }
  }

  run.resident.objects = o.resident;
  run.resident.rss_before = ResidentBytes();
  const auto preload_start = Clock::now();
  if (!Preload(pool, o.resident, o, [] {})) return run;
  run.resident.seconds = SecondsSince(preload_start);
  // Let the maintenance thread drop the ended puts from the put-timeout queues first.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  run.resident.rss_after = ResidentBytes();

  run.phases = RunLookupPhases(o, o.resident, stubs);
  if (o.Runs("put")) run.phases.push_back(RunPutPhase(o, stubs));
  (*server)->Shutdown();
  run.ok = true;
  return run;
}

struct EvictRun {
  uint64_t pool_objects = 0;
  double bytes_per_object = 0;  // in-process, no gRPC
  std::vector<double> pass_ms;
  std::vector<double> visited;  // units the pass looked at
  std::vector<double> evicted;  // objects it evicted
  std::vector<double> reranked;  // units it moved back (read since ranked; none here)
};

// Eviction pass cost in a pool of `objects`: each pass asks for --evict-units objects' bytes.
EvictRun MeasureEviction(const BenchOptions& o, uint64_t objects) {
  EvictRun run;
  run.pool_objects = objects;
  kvpool::ManualClock clock;
  auto pool = std::make_unique<PoolMetadata>(kvpool::master::PoolOptions{}, &clock);
  (void)pool->MountSegment(SegmentRecord(0, std::max<uint64_t>(objects, 1) * o.value_bytes * 2));
  const uint64_t rss_before = ResidentBytes();
  // One millisecond per batch of puts: recency spreads over the pool as it would over time.
  if (!Preload(*pool, objects, o, [&] { clock.AdvanceMs(1); })) return run;
  run.bytes_per_object = static_cast<double>(ResidentBytes() - rss_before) / static_cast<double>(objects);
  clock.AdvanceMs(1);
  for (int pass = 0; pass < o.evict_passes; ++pass) {
    const auto before = pool->Stat();
    const auto start = Clock::now();
    pool->EvictAtLeast(o.evict_units * o.value_bytes);
    run.pass_ms.push_back(SecondsSince(start) * 1e3);
    const auto after = pool->Stat();
    run.visited.push_back(static_cast<double>(after.eviction_units_visited - before.eviction_units_visited));
    run.evicted.push_back(static_cast<double>(after.evicted_objects - before.evicted_objects));
    run.reranked.push_back(static_cast<double>(after.eviction_units_reranked - before.eviction_units_reranked));
  }
  return run;
}

struct RebuildRun {
  uint64_t entries = 0;
  std::vector<double> seconds;  // RejoinSegment, measured around the call
  uint64_t objects = 0;         // what the last run brought back
};

// A restarted master takes back one segment whose store kept --rebuild-objects entries.
RebuildRun MeasureRebuild(const BenchOptions& o) {
  RebuildRun run;
  run.entries = o.rebuild_objects;
  const int64_t wall = kvpool::WallClockMs();
  kvpool::proto::MountSegmentRequest request;
  request.mutable_entries()->Reserve(static_cast<int>(o.rebuild_objects));
  for (uint64_t i = 0; i < o.rebuild_objects; ++i) {
    auto* e = request.add_entries();
    e->set_key(ObjectKey(i, o.group_size));
    e->set_group(GroupOf(i, o.group_size));
    e->set_offset(i * o.value_bytes);
    e->set_length(o.value_bytes);
    e->set_put_id(i + 1);
    e->set_complete(true);
    // Puts ended over the last minutes, oldest first (the LRU order they come back in).
    const int64_t completed = wall - static_cast<int64_t>((o.rebuild_objects - i) / 10);
    e->set_put_started_unix_ms(completed - 1);
    e->set_completed_unix_ms(completed);
  }
  std::span<const kvpool::proto::IndexEntry* const> entries(request.entries().data(),
                                                            request.entries_size());
  for (int r = 0; r < o.rebuild_runs; ++r) {
    auto pool = std::make_unique<PoolMetadata>(kvpool::master::PoolOptions{}, kvpool::SteadyClock::Get());
    kvpool::master::SegmentInfo info = SegmentRecord(0, std::max<uint64_t>(o.rebuild_objects, 1) * o.value_bytes);
    info.id = 4242;
    info.keeps_index = true;
    const auto start = Clock::now();
    auto rejoined = pool->RejoinSegment(info, entries, kvpool::WallClockMs() + 5000);
    run.seconds.push_back(SecondsSince(start));
    if (!rejoined.ok()) {
      std::fprintf(stderr, "RejoinSegment failed: %s\n", rejoined.status().ToString().c_str());
      return run;
    }
    run.objects = rejoined->objects;
  }
  return run;
}

nlohmann::json ToJson(const BenchOptions& o, const RpcRun* rpc, const std::vector<EvictRun>& evictions,
                      const RebuildRun* rebuild) {
  nlohmann::json j;
  j["threads"] = o.threads;
  j["seconds"] = o.seconds;
  j["hardware_threads"] = std::thread::hardware_concurrency();
  j["key_bytes"] = ObjectKey(0, o.group_size).size();
  j["group_size"] = o.group_size;
  j["value_bytes"] = o.value_bytes;
  if (rpc) {
    j["preloaded_keys"] = rpc->resident.objects;
    j["resident"] = {{"objects", rpc->resident.objects},
                     {"rss_before_bytes", rpc->resident.rss_before},
                     {"rss_after_bytes", rpc->resident.rss_after},
                     {"bytes_per_object", rpc->resident.bytes_per_object()},
                     {"preload_seconds", rpc->resident.seconds}};
    for (const auto& r : rpc->phases) {
      j["phases"].push_back({{"name", r.name}, {"unit", r.unit}, {"batch", r.batch},
                             {"rate", r.rate()}, {"items", r.items}, {"calls", r.calls},
                             {"errors", r.errors}, {"seconds", r.seconds},
                             {"p50_us", r.p50_us}, {"p99_us", r.p99_us}});
    }
  }
  for (const auto& e : evictions) {
    j["evict"].push_back({{"pool_objects", e.pool_objects}, {"units_per_pass", o.evict_units},
                          {"bytes_per_object", e.bytes_per_object}, {"pass_ms", e.pass_ms},
                          {"visited", e.visited}, {"evicted", e.evicted}, {"reranked", e.reranked},
                          {"median_pass_ms", Median(e.pass_ms)}, {"median_visited", Median(e.visited)}});
  }
  if (rebuild) {
    j["rebuild"] = {{"entries", rebuild->entries}, {"objects", rebuild->objects},
                    {"seconds", rebuild->seconds}, {"median_seconds", Median(rebuild->seconds)}};
  }
  return j;
}

void PrintTable(const BenchOptions& o, const RpcRun* rpc, const std::vector<EvictRun>& evictions,
                const RebuildRun* rebuild) {
  std::printf("master bench: %d client threads, %.1f s per phase, %u hw threads, %zu-byte keys, "
              "group size %d\n", o.threads, o.seconds, std::thread::hardware_concurrency(),
              ObjectKey(0, o.group_size).size(), o.group_size);
  if (rpc) {
    std::printf("resident: %llu objects in %.1f s, %.0f bytes/object (RSS %.2f -> %.2f GiB)\n",
                static_cast<unsigned long long>(rpc->resident.objects), rpc->resident.seconds,
                rpc->resident.bytes_per_object(), rpc->resident.rss_before / 1073741824.0,
                rpc->resident.rss_after / 1073741824.0);
    std::printf("%-20s %6s %14s %-10s %10s %10s %10s %7s\n", "phase", "batch", "rate", "unit",
                "calls", "p50 us", "p99 us", "errors");
    for (const auto& r : rpc->phases) {
      std::printf("%-20s %6d %14.0f %-10s %10llu %10.1f %10.1f %7llu\n", r.name.c_str(), r.batch,
                  r.rate(), r.unit.c_str(), static_cast<unsigned long long>(r.calls), r.p50_us,
                  r.p99_us, static_cast<unsigned long long>(r.errors));
    }
  }
  for (const auto& e : evictions) {
    std::printf("evict: pool of %llu objects (%.0f bytes/object): pass of %llu units, median %.3f ms, "
                "%.0f units visited\n", static_cast<unsigned long long>(e.pool_objects),
                e.bytes_per_object, static_cast<unsigned long long>(o.evict_units),
                Median(e.pass_ms), Median(e.visited));
  }
  if (rebuild) {
    std::printf("rebuild: %llu entries -> %llu objects, median %.3f s over %zu runs\n",
                static_cast<unsigned long long>(rebuild->entries),
                static_cast<unsigned long long>(rebuild->objects), Median(rebuild->seconds),
                rebuild->seconds.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app("kvpool master benchmark: control plane over loopback gRPC, eviction and rebuild in-process");
  app.add_option("--threads", o.threads, "client threads")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--seconds", o.seconds, "duration of each rpc phase")->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs of each lookup phase")->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--resident,--keys", o.resident, "objects put before the rpc phases")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--group-size", o.group_size, "stage objects per chunk group (0: ungrouped)")
      ->check(CLI::Range(0, 64))->capture_default_str();
  app.add_option("--preload-threads", o.preload_threads, "threads putting the resident objects")
      ->capture_default_str();
  app.add_option("--exists-batch", o.exists_batch, "keys per BatchExists and BatchGetReplicas")->capture_default_str();
  app.add_option("--put-batch", o.put_batch, "objects per BatchPutStart/End")->capture_default_str();
  app.add_option("--evict-pools", o.evict_pools, "pool sizes (objects) for the evict phase")
      ->delimiter(',')->capture_default_str();
  app.add_option("--evict-units", o.evict_units, "objects one eviction pass frees")->capture_default_str();
  app.add_option("--evict-passes", o.evict_passes, "passes measured at each pool size")->capture_default_str();
  app.add_option("--rebuild-objects", o.rebuild_objects, "index entries of the rejoining segment")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rebuild-runs", o.rebuild_runs, "rebuilds measured")->capture_default_str();
  app.add_option("--phases", o.phases, "comma-separated phases to run: exists, get, put, evict, rebuild")
      ->capture_default_str();
  app.add_flag("--json", o.json, "print one JSON object instead of a table");
  CLI11_PARSE(app, argc, argv);

  std::optional<RpcRun> rpc;
  if (o.Runs("exists") || o.Runs("get") || o.Runs("put")) {
    rpc = RunRpcPhases(o);
    if (!rpc->ok) return 1;
  }
  std::vector<EvictRun> evictions;
  if (o.Runs("evict")) {
    for (uint64_t objects : o.evict_pools) evictions.push_back(MeasureEviction(o, objects));
  }
  std::optional<RebuildRun> rebuild;
  if (o.Runs("rebuild")) rebuild = MeasureRebuild(o);

  const RpcRun* rpc_ptr = rpc ? &*rpc : nullptr;
  const RebuildRun* rebuild_ptr = rebuild ? &*rebuild : nullptr;
  if (o.json) {
    std::printf("%s\n", ToJson(o, rpc_ptr, evictions, rebuild_ptr).dump(2).c_str());
  } else {
    PrintTable(o, rpc_ptr, evictions, rebuild_ptr);
  }
  if (rpc) {
    for (const auto& r : rpc->phases) {
      if (r.errors > 0) return 2;
    }
  }
  if (rebuild && rebuild->objects != rebuild->entries) return 2;
  return 0;
}
