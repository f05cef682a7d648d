// kvpool_master_bench: control-plane throughput of an in-process master over loopback gRPC.
//
// Starts a MasterServer on 127.0.0.1:0, mounts two segments (endpoint records only; no
// store runs), inserts --keys objects, then with --threads client threads (each with its
// own channel) measures:
//   exists  BatchExists keys/s, batches of --exists-batch keys that are all present
//   put     BatchPutStart + BatchPutEnd objects/s, batches of --put-batch fresh keys
//
//   kvpool_master_bench --threads 4 --seconds 3 [--json]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "master/master_server.h"
#include "proto/master.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvpool::proto::Master;

struct BenchOptions {
  int threads = 4;
  double seconds = 3;
  int keys = 200000;
  int exists_batch = 1000;
  int put_batch = 128;
  uint64_t value_bytes = 4096;
  std::string phases = "exists,put";
  bool json = false;
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
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
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

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app("kvpool master control-plane benchmark (in-process master, loopback gRPC)");
  app.add_option("--threads", o.threads, "client threads")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--seconds", o.seconds, "duration of each phase")->capture_default_str();
  app.add_option("--keys", o.keys, "objects inserted before the exists phase")->capture_default_str();
  app.add_option("--exists-batch", o.exists_batch, "keys per BatchExists")->capture_default_str();
  app.add_option("--put-batch", o.put_batch, "objects per BatchPutStart/End")->capture_default_str();
  app.add_option("--phases", o.phases, "comma-separated phases to run: exists, put")
      ->capture_default_str();
  app.add_flag("--json", o.json, "print one JSON object instead of a table");
  CLI11_PARSE(app, argc, argv);

  kvpool::master::MasterOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.heartbeat_ttl_ms = 24 * 3600 * 1000;  // no store heartbeats the bench's segments
  auto server = kvpool::master::MasterServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start master: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*server)->address();

  std::vector<std::unique_ptr<Master::Stub>> stubs;
  for (int t = 0; t < o.threads; ++t) stubs.push_back(NewStub(address, t));

  // Two segments; only records, no store behind them.
  for (int s = 0; s < 2; ++s) {
    grpc::ClientContext context;
    kvpool::proto::MountSegmentRequest request;
    request.mutable_segment()->set_store_id(fmt::format("bench-store-{}", s));
    request.mutable_segment()->set_host_id("bench-host");
    request.mutable_segment()->set_tcp_address("127.0.0.1:1");
    request.mutable_segment()->set_size(uint64_t{64} << 30);
    kvpool::proto::MountSegmentReply reply;
    if (!stubs[0]->MountSegment(&context, request, &reply).ok() || reply.code() != kvpool::proto::OK) {
      std::fprintf(stderr, "MountSegment failed: %s\n", reply.message().c_str());
      return 1;
    }
  }

  // Insert the keys the exists phase asks about.
  for (int first = 0; first < o.keys; first += 1000) {
    kvpool::proto::BatchPutStartRequest start;
    kvpool::proto::BatchKeysRequest end;
    for (int i = first; i < std::min(o.keys, first + 1000); ++i) {
      auto* item = start.add_items();
      item->set_key(KeyName("preload/", i));
      item->set_length(o.value_bytes);
      end.add_keys(item->key());
    }
    grpc::ClientContext c1, c2;
    kvpool::proto::BatchPutStartReply started;
    kvpool::proto::BatchKeysReply ended;
    if (!stubs[0]->BatchPutStart(&c1, start, &started).ok() ||
        !stubs[0]->BatchPutEnd(&c2, end, &ended).ok()) {
      std::fprintf(stderr, "preload failed\n");
      return 1;
    }
  }

  std::vector<PhaseResult> results;

  // exists: each thread cycles through a few prebuilt requests of random preloaded keys.
  constexpr int kRequestsPerThread = 8;
  std::vector<std::vector<kvpool::proto::BatchKeysRequest>> exists_requests(o.threads);
  std::mt19937_64 rng(1);
  for (auto& per_thread : exists_requests) {
    per_thread.resize(kRequestsPerThread);
    for (auto& request : per_thread) {
      request.mutable_keys()->Reserve(o.exists_batch);
      for (int i = 0; i < o.exists_batch; ++i) request.add_keys(KeyName("preload/", rng() % o.keys));
    }
  }
  const bool run_exists = o.phases.find("exists") != std::string::npos;
  const bool run_put = o.phases.find("put") != std::string::npos;
  if (run_exists) results.push_back(RunPhase(o, "BatchExists", "keys/s", o.exists_batch, stubs,
                             [&](int t, uint64_t round, Master::Stub& stub) -> uint64_t {
                               grpc::ClientContext context;
                               kvpool::proto::BatchExistsReply reply;
                               const auto& request = exists_requests[t][round % kRequestsPerThread];
                               if (!stub.BatchExists(&context, request, &reply).ok()) return 0;
                               // Every key was inserted: anything else is a bug, not a rate.
                               if (std::count(reply.exists().begin(), reply.exists().end(), 1) !=
                                   request.keys_size()) {
                                 return 0;
                               }
                               return static_cast<uint64_t>(request.keys_size());
                             }));

  // put: fresh keys per batch; start then end.
  if (run_put) results.push_back(RunPhase(
      o, "BatchPutStart+End", "objects/s", o.put_batch, stubs,
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
            static std::once_flag once;
            std::call_once(once, [&] { std::fprintf(stderr, "BatchPutStart: %s\n", r.message().c_str()); });
            return 0;
          }
        }
        if (!stub.BatchPutEnd(&c2, end, &ended).ok()) return 0;
        for (const auto& r : ended.results()) {
          if (r.code() != kvpool::proto::OK) {
            static std::once_flag once;
            std::call_once(once, [&] { std::fprintf(stderr, "BatchPutEnd: %s\n", r.message().c_str()); });
            return 0;
          }
        }
        return static_cast<uint64_t>(o.put_batch);
      }));

  (*server)->Shutdown();

  if (o.json) {
    nlohmann::json j;
    j["threads"] = o.threads;
    j["seconds"] = o.seconds;
    j["preloaded_keys"] = o.keys;
    j["hardware_threads"] = std::thread::hardware_concurrency();
    for (const auto& r : results) {
      j["phases"].push_back({{"name", r.name}, {"unit", r.unit}, {"batch", r.batch},
                             {"rate", r.rate()}, {"items", r.items}, {"calls", r.calls},
                             {"errors", r.errors}, {"seconds", r.seconds},
                             {"p50_us", r.p50_us}, {"p99_us", r.p99_us}});
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("master bench: %d client threads, %.1f s per phase, %d preloaded keys, %u hw threads\n",
                o.threads, o.seconds, o.keys, std::thread::hardware_concurrency());
    std::printf("%-20s %6s %14s %-10s %10s %10s %10s %7s\n", "phase", "batch", "rate", "unit",
                "calls", "p50 us", "p99 us", "errors");
    for (const auto& r : results) {
      std::printf("%-20s %6d %14.0f %-10s %10llu %10.1f %10.1f %7llu\n", r.name.c_str(), r.batch,
                  r.rate(), r.unit.c_str(), static_cast<unsigned long long>(r.calls), r.p50_us,
                  r.p99_us, static_cast<unsigned long long>(r.errors));
    }
  }
  for (const auto& r : results) {
    if (r.errors > 0) return 2;
  }
  return 0;
}
