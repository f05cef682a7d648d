// pool_load_probe: a client that keeps every part of a pool busy and counts what happens, for
// tests that break the network under it (tests/cluster_test.cc runs it inside a namespace).
//
// One thread per part puts a fresh value to that part, reads it back and re-reads an earlier
// one, checking every byte. Every 100 ms, and once more on SIGTERM/SIGINT before it exits, it
// prints one JSON line: per part, calls that succeeded, calls that could not reach the part
// (UNAVAILABLE or TIMEOUT), calls refused for another reason (e.g. NO_SPACE while the part is
// full of leased values), misses (an earlier value dropped: allowed), wrong bytes (never
// allowed) and the slowest call in milliseconds. --ucx-tls: over UCX to stores that serve it.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "client/client.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> stop{false};

struct PartCounters {
  std::atomic<uint64_t> puts_ok{0}, gets_ok{0}, unreachable{0}, refused{0}, misses{0}, wrong{0};
  std::atomic<uint64_t> max_call_ms{0};

  void Failed(const kvpool::Status& s) {
    const bool cut = s.code() == kvpool::StatusCode::kUnavailable || s.code() == kvpool::StatusCode::kTimeout;
    (cut ? unreachable : refused)++;
  }
};

// The bytes of value `n` of `key`: a function of both, so any misplaced byte shows.
std::string ValueFor(const std::string& key, size_t size) {
  std::string v(size, '\0');
  uint64_t x = std::hash<std::string>{}(key) | 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = static_cast<char>(x);
  }
  return v;
}

// Keys of part `part`: "probe-<part>-<n>" for the n that route there.
std::string NextKey(const kvpool::client::PoolParts& pool, uint32_t part, uint64_t& n) {
  while (true) {
    std::string key = fmt::format("probe-{}-{}", part, n++);
    if (pool.PartOf(key) == part) return key;
  }
}

void Load(kvpool::client::Client& client, uint32_t part, size_t value_size, PartCounters& c) {
  std::vector<std::string> written;
  uint64_t n = 0;
  std::mt19937_64 rng(part);
  const auto timed = [&c](auto&& call) {
    const auto start = Clock::now();
    auto result = call();
    const uint64_t ms =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    uint64_t seen = c.max_call_ms.load();
    while (ms > seen && !c.max_call_ms.compare_exchange_weak(seen, ms)) {
    }
    return result;
  };
  const auto check = [&](const std::string& key) {
    auto got = timed([&] { return client.Get(key); });
    if (got.ok()) {
      (*got == ValueFor(key, value_size) ? c.gets_ok : c.wrong)++;
    } else if (got.status().code() == kvpool::StatusCode::kNotFound) {
      c.misses++;
    } else {
      c.Failed(got.status());
    }
  };
  while (!stop.load()) {
    const std::string key = NextKey(client.pool(), part, n);
    const std::string value = ValueFor(key, value_size);
    const kvpool::Status put = timed([&] { return client.Put(key, std::as_bytes(std::span(value))); });
    if (put.ok()) {
      c.puts_ok++;
      written.push_back(key);
      check(key);
    } else {
      c.Failed(put);
    }
    if (!written.empty()) check(written[rng() % written.size()]);
  }
}

nlohmann::json Snapshot(const std::vector<PartCounters>& parts) {
  nlohmann::json j = nlohmann::json::array();
  for (const PartCounters& c : parts) {
    j.push_back({{"puts_ok", c.puts_ok.load()},         {"gets_ok", c.gets_ok.load()},
                 {"unreachable", c.unreachable.load()}, {"refused", c.refused.load()},
                 {"misses", c.misses.load()},           {"wrong", c.wrong.load()},
                 {"max_call_ms", c.max_call_ms.load()}});
  }
  return {{"parts", j}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("pool_load_probe");
  std::string pool_file;
  uint64_t value_size = 64 << 10;
  int timeout_ms = 1000;
  app.add_option("--pool-file", pool_file, "the pool")->required();
  app.add_option("--value-size", value_size, "bytes per value")->check(CLI::Range(1, 64 << 20));
  app.add_option("--timeout-ms", timeout_ms, "deadline of every master call and transfer")->check(CLI::Range(10, 60000));
  std::string ucx_tls;
  app.add_option("--ucx-tls", ucx_tls, "reach stores that serve UCX over it, with these UCX transports (e.g. tcp)");
  CLI11_PARSE(app, argc, argv);

  auto pool = kvpool::client::ReadPoolFile(pool_file);
  if (!pool.ok()) {
    fmt::print(stderr, "pool_load_probe: {}\n", pool.status().ToString());
    return 2;
  }
  kvpool::client::ClientOptions options;
  options.pool = *pool;
  options.rpc_timeout = std::chrono::milliseconds(timeout_ms);
  options.transfer_timeout = std::chrono::milliseconds(timeout_ms);
  options.transfer.connect_timeout = std::chrono::milliseconds(timeout_ms);
  if (!ucx_tls.empty()) options.transfer.ucx = {true, ucx_tls, ""};
  // Short read leases: a part full of leased values refuses puts until they end.
  options.lease = std::chrono::milliseconds(200);
  auto client = kvpool::client::Client::Connect(options);
  if (!client.ok()) {
    fmt::print(stderr, "pool_load_probe: {}\n", client.status().ToString());
    return 2;
  }
  std::signal(SIGTERM, [](int) { stop = true; });
  std::signal(SIGINT, [](int) { stop = true; });

  std::vector<PartCounters> parts(pool->size());
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < pool->size(); ++p) {
    threads.emplace_back([&, p] { Load(**client, p, value_size, parts[p]); });
  }
  while (!stop.load()) {
    fmt::print("{}\n", Snapshot(parts).dump());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& t : threads) t.join();
  fmt::print("{}\n", Snapshot(parts).dump());
  return 0;
}
