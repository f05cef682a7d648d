// kvpool_pool_parts_bench: what splitting the pool into parts (one per rail) buys a restore,
// and what asking several masters costs a lookup. Runs against a running pool (on the
// namespace cluster: scripts/bench-cluster.sh); the two arms differ only in where the stages
// live, so run it once per stage map:
//
//   kvpool_pool_parts_bench --pool-file F                        # stage s in part s mod N
//   kvpool_pool_parts_bench --pool-file F --stage-parts 0,0,0,0  # every stage in part 0
//
// Steps: put --chunks chunks of --stages stage objects of --object-size; then
//   restore  one thread per stage reads its stage's objects (one batch each, as the
//            connector's per-stage restore workers do), every byte checked once; GB/s of all
//            stages together, median over --repeat
//   lookup   one BatchLookup of every stage key of every chunk (the connector's prefix
//            lookup): p50 / p99 over --lookups calls
// then removes what it put. Prints one JSON object.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "client/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvpool::client::Client;

struct Options {
  std::string pool_file, stage_parts;
  uint32_t stages = 4;
  uint32_t chunks = 32;
  uint64_t object_size = 1 << 20;
  int repeat = 5;
  int lookups = 200;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Byte i of object `key`: depends on both, so a misplaced read shows.
char PatternByte(size_t key_hash, size_t i) { return static_cast<char>((key_hash >> (i % 7)) + i * 131); }

std::string Value(const std::string& key, uint64_t size) {
  std::string v(size, '\0');
  const size_t h = std::hash<std::string>{}(key);
  for (size_t i = 0; i < size; ++i) v[i] = PatternByte(h, i);
  return v;
}

// keys[stage][chunk]
std::vector<std::vector<std::string>> Keys(const Options& o) {
  const std::string run = fmt::format("parts-bench-{}", std::random_device{}());
  std::vector<std::vector<std::string>> keys(o.stages);
  for (uint32_t s = 0; s < o.stages; ++s) {
    for (uint32_t c = 0; c < o.chunks; ++c) keys[s].push_back(fmt::format("{}/c{}/s{}", run, c, s));
  }
  return keys;
}

kvpool::Status PutAll(Client& client, const Options& o, const std::vector<std::vector<std::string>>& keys) {
  for (const auto& stage : keys) {
    std::vector<std::string> values;
    std::vector<kvpool::client::ValueView> views;
    for (const auto& k : stage) values.push_back(Value(k, o.object_size));
    for (const auto& v : values) views.push_back(std::as_bytes(std::span(v)));
    for (const kvpool::Status& s : client.BatchPut(stage, views)) {
      if (!s.ok()) return s;
    }
  }
  return kvpool::Status::Ok();
}

// One restore: every stage's objects, one thread per stage. Returns seconds, or an error.
kvpool::Result<double> Restore(Client& client, const Options& o, const std::vector<std::vector<std::string>>& keys,
                               std::vector<std::vector<std::string>>& buffers, bool check) {
  std::vector<kvpool::Status> status(o.stages);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (uint32_t s = 0; s < o.stages; ++s) {
    threads.emplace_back([&, s] {
      std::vector<kvpool::client::ValueBuffer> views;
      for (auto& b : buffers[s]) views.push_back(std::as_writable_bytes(std::span(b)));
      for (const auto& r : client.BatchGetInto(keys[s], views)) {
        if (!r.ok()) status[s] = r.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = Seconds(Clock::now() - start);
  for (const kvpool::Status& s : status) {
    if (!s.ok()) return s;
  }
  if (check) {
    for (uint32_t s = 0; s < o.stages; ++s) {
      for (uint32_t c = 0; c < o.chunks; ++c) {
        if (buffers[s][c] != Value(keys[s][c], o.object_size))
          return kvpool::Internal(fmt::format("wrong bytes in {}", keys[s][c]));
      }
    }
  }
  return seconds;
}

int Run(const Options& o) {
  auto pool = kvpool::client::ReadPoolFile(o.pool_file);
  if (pool.ok() && !o.stage_parts.empty()) {
    auto stages = kvpool::client::ParseStageParts(o.stage_parts);
    if (!stages.ok()) pool = stages.status();
    else pool->stage_parts = *stages;
  }
  if (pool.ok()) {
    if (kvpool::Status s = pool->Validate(); !s.ok()) pool = s;
  }
  if (!pool.ok()) {
    fmt::print(stderr, "kvpool_pool_parts_bench: {}\n", pool.status().ToString());
    return 2;
  }
  kvpool::client::ClientOptions co;
  co.pool = *pool;
  co.lease = std::chrono::milliseconds(1000);
  co.transfer_timeout = std::chrono::seconds(60);
  auto client = Client::Connect(co);
  if (!client.ok()) {
    fmt::print(stderr, "kvpool_pool_parts_bench: {}\n", client.status().ToString());
    return 2;
  }
  Client& c = **client;

  const auto keys = Keys(o);
  std::set<uint32_t> parts_used;
  for (const auto& stage : keys) parts_used.insert(pool->PartOf(stage[0]));
  if (kvpool::Status s = PutAll(c, o, keys); !s.ok()) {
    fmt::print(stderr, "kvpool_pool_parts_bench: put: {}\n", s.ToString());
    return 1;
  }

  std::vector<std::vector<std::string>> buffers(o.stages, std::vector<std::string>(o.chunks, std::string(o.object_size, '\0')));
  std::vector<double> restore_s;
  for (int r = 0; r <= o.repeat; ++r) {  // the first run warms connections and is not counted
    auto seconds = Restore(c, o, keys, buffers, /*check=*/r == 0);
    if (!seconds.ok()) {
      fmt::print(stderr, "kvpool_pool_parts_bench: restore: {}\n", seconds.status().ToString());
      return 1;
    }
    if (r > 0) restore_s.push_back(*seconds);
  }

  std::vector<std::string> all;
  for (uint32_t ch = 0; ch < o.chunks; ++ch) {
    for (uint32_t s = 0; s < o.stages; ++s) all.push_back(keys[s][ch]);
  }
  std::vector<double> lookup_us;
  for (int i = 0; i <= o.lookups; ++i) {
    const auto start = Clock::now();
    const kvpool::client::LookupResult found = c.BatchLookup(all);
    const double us = Seconds(Clock::now() - start) * 1e6;
    for (size_t k = 0; k < found.size(); ++k) {
      if (!found.length(k).ok()) {
        fmt::print(stderr, "kvpool_pool_parts_bench: lookup: {}\n", found.length(k).status().ToString());
        return 1;
      }
    }
    if (i > 0) lookup_us.push_back(us);
  }
  for (const auto& stage : keys) (void)c.BatchRemove(stage);

  const double bytes = static_cast<double>(o.object_size) * o.stages * o.chunks;
  const double median_s = Percentile(restore_s, 0.5);
  nlohmann::json j = {{"parts", pool->size()},
                      {"parts_used", parts_used.size()},
                      {"stage_parts", o.stage_parts.empty() ? "stage mod parts" : o.stage_parts},
                      {"stages", o.stages},
                      {"chunks", o.chunks},
                      {"object_size", o.object_size},
                      {"restore_bytes", bytes},
                      {"restore_s_median", median_s},
                      {"restore_gbps", bytes / median_s / 1e9},
                      {"lookup_keys", all.size()},
                      {"lookup_p50_us", Percentile(lookup_us, 0.5)},
                      {"lookup_p99_us", Percentile(lookup_us, 0.99)},
                      {"repeat", o.repeat},
                      {"lookups", o.lookups}};
  fmt::print("{}\n", j.dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("kvpool_pool_parts_bench: restore over pool parts and lookup across their masters");
  Options o;
  app.add_option("--pool-file", o.pool_file, "the pool")->required();
  app.add_option("--stage-parts", o.stage_parts, "part of each stage, e.g. 0,0,0,0 (default: stage mod parts)");
  app.add_option("--stages", o.stages, "pipeline stages")->check(CLI::Range(1, 64));
  app.add_option("--chunks", o.chunks, "chunks of the prefix")->check(CLI::Range(1, 100000));
  app.add_option("--object-size", o.object_size, "bytes of one stage's share of a chunk")->check(CLI::Range(1, 1 << 28));
  app.add_option("--repeat", o.repeat, "timed restores (median)")->check(CLI::Range(1, 1000));
  app.add_option("--lookups", o.lookups, "timed lookups")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
