// ssd_pool_bench: one pipeline stage's share of a history read back through the pool, once
// from DRAM and once from the store's SSD tier (issue 17), in one run. A real master and a
// storage service with an SSD tier on a file (in this process, on loopback) and the real
// client. Per repetition: put the share's objects into a segment twice their size (the
// watermark at half: nothing moves), read them all (DRAM); put as much again, which pushes the
// share, least recently used, to SSD; once it is all there, read it again (SSD: each lookup
// loads its objects back into the segment, then the client copies them as before). Every
// byte read is compared with what was put. Prints one JSON object.
//
//   ssd_pool_bench --dir /var/tmp --share 512MiB --object 4MiB --reps 5
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "client/client.h"
#include "common/byte_size.h"
#include "common/clock.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"
#include "store/storage_service.h"

using namespace kvpool;
using Seconds = std::chrono::duration<double>;

namespace {

void Fill(std::string& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t k = 0; k + 8 <= v.size(); k += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(&v[k], &x, 8);
  }
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "ssd_pool_bench: %s\n", what.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("One stage's share read back through the pool from DRAM and from the SSD tier");
  std::string dir = "/var/tmp", share_text = "512MiB", object_text = "4MiB";
  int reps = 5;
  app.add_option("--dir", dir, "folder of the SSD tier's file (a real disk)")->capture_default_str();
  app.add_option("--share", share_text, "bytes of the share")->capture_default_str();
  app.add_option("--object", object_text, "bytes per object")->capture_default_str();
  app.add_option("--reps", reps, "repetitions")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const auto share = ParseByteSize(share_text), object = ParseByteSize(object_text);
  if (!share.ok() || !object.ok() || *object == 0 || *share < *object) Fail("bad --share or --object");
  const size_t count = *share / *object;

  master::MasterOptions mo;
  mo.listen = "127.0.0.1:0";
  mo.metrics_listen = "";
  // The share is 0.4 of the segment: putting it moves nothing; putting as much again passes the
  // watermark by exactly the share, which is the older, so all of it goes to SSD. (Not 0.5 of
  // a segment twice its size: the allocator cannot fill a segment to its last byte.)
  mo.high_watermark = 0.4;
  mo.maintenance_interval_ms = 10;
  auto master = master::MasterServer::Start(mo);
  if (!master.ok()) Fail(master.status().ToString());
  const std::string tier_path = dir + "/kvpool-ssd-pool-bench.tier";
  std::filesystem::remove(tier_path);  // a file an earlier run left would bring its objects back
  store::StorageOptions so;
  so.master_address = (*master)->address();
  so.memory_bytes = count * *object * 5 / 2;
  so.ssd_path = tier_path;
  so.ssd_bytes = 2 * count * (*object + ssd::SsdTier::kHeaderBytes) + (uint64_t{1} << 20);
  so.ssd_max_object_bytes = *object;
  auto store = store::StorageService::Start(so);
  if (!store.ok()) Fail(store.status().ToString());
  client::ClientOptions co;
  co.pool = client::PoolParts::Single((*master)->address());
  co.lease = std::chrono::milliseconds(2000);  // a leased object is not demoted: let the DRAM read's end soon
  auto client = client::Client::Connect(co);
  if (!client.ok()) Fail(client.status().ToString());

  std::vector<std::string> values(count, std::string(*object, '\0')), out(count, std::string(*object, '\0'));
  std::vector<client::ValueBuffer> buffers;
  for (auto& o : out) buffers.push_back(std::as_writable_bytes(std::span(o)));
  auto tiers = [&] { return (*master)->pool()->Stat().tiers; };

  std::vector<double> dram_s, ssd_s;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::string> keys, filler;
    std::vector<client::ValueView> views;
    for (size_t i = 0; i < count; ++i) {
      keys.push_back(fmt::format("bench/r{}/share{}", rep, i));
      filler.push_back(fmt::format("bench/r{}/filler{}", rep, i));
      Fill(values[i], rep * count + i);
      views.push_back(std::as_bytes(std::span(values[i])));
    }
    auto check = [&](const std::vector<Result<uint64_t>>& got, const char* from) {
      for (size_t i = 0; i < count; ++i) {
        if (!got[i].ok()) Fail(fmt::format("read from {}: {}", from, got[i].status().ToString()));
        if (out[i] != values[i]) Fail(fmt::format("read from {}: object {} differs from what was put", from, i));
      }
    };
    for (const Status& s : (*client)->BatchPut(keys, views)) {
      if (!s.ok()) Fail("put: " + s.ToString());
    }
    auto t0 = std::chrono::steady_clock::now();
    check((*client)->BatchGetInto(keys, buffers), "DRAM");
    dram_s.push_back(Seconds(std::chrono::steady_clock::now() - t0).count());

    std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // past the DRAM read's leases
    const uint64_t before = tiers().demotions;
    const auto filled = (*client)->BatchPut(filler, views);
    for (size_t i = 0; i < filled.size(); ++i) {
      if (!filled[i].ok()) Fail(fmt::format("filler put {}: {}", i, filled[i].ToString()));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (tiers().demotions - before < count || tiers().demoting_bytes > 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        const auto t = tiers();
        Fail(fmt::format("the share did not reach SSD in time ({} demoted, {} failed, {} bytes on their way)",
                         t.demotions - before, t.demotion_failures, t.demoting_bytes));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& o : out) std::fill(o.begin(), o.end(), '\0');
    const uint64_t hits_before = tiers().ssd_hits;
    t0 = std::chrono::steady_clock::now();
    check((*client)->BatchGetInto(keys, buffers), "SSD");
    ssd_s.push_back(Seconds(std::chrono::steady_clock::now() - t0).count());
    if (tiers().ssd_hits - hits_before != count) Fail("not every object of the share was read from SSD");
    std::vector<std::string> all = keys;
    all.insert(all.end(), filler.begin(), filler.end());
    (void)(*client)->BatchRemove(all);
    // Removed objects still leased free their bytes when the lease ends: start the next
    // repetition on an empty segment, or those frees would stop its demotion short.
    while ((*master)->pool()->Stat().used_bytes > 0) {
      if (std::chrono::steady_clock::now() > deadline) Fail("the segment did not empty");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  const double bytes = static_cast<double>(count * *object);
  nlohmann::json j{{"share_bytes", count * *object}, {"object_bytes", *object}, {"objects", count},
                   {"reps", reps},
                   {"dram_seconds", dram_s}, {"ssd_seconds", ssd_s},
                   {"dram_gbps_median", bytes / Median(dram_s) / 1e9}, {"ssd_gbps_median", bytes / Median(ssd_s) / 1e9},
                   {"ssd_over_dram_time", Median(ssd_s) / Median(dram_s)},
                   {"promotions", tiers().promotions}, {"promotion_failures", tiers().promotion_failures}};
  std::printf("%s\n", j.dump().c_str());
  client->reset();
  (*store)->Stop();
  (*master)->Shutdown();
  std::filesystem::remove(tier_path);
  return 0;
}
