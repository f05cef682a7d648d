// ssd_pool_bench: one pipeline stage's share of a history read back through the pool from DRAM
// and from the store's SSD tier (issue 17), each way the tier can be read, in one run. Two
// pools in this process on loopback, each a real master and a storage service with an SSD tier
// on a file, read by the real client: one whose master sends clients to the tier's file (the
// default), one that loads SSD objects back into DRAM first (--promote-on-hit). Per repetition
// and pool: put the share's objects into a segment 2.5x their size (nothing moves), read them
// all (DRAM); put as much again, which pushes the share, least recently used, to SSD; once it
// is all there, read it again: from the file by the client itself (same host), then once more
// through the store over tcp (the objects stay on SSD: reads do not move them), or, on the
// other pool, through a load into the segment. Every byte read is compared with what was put.
// Prints one JSON object.
//
//   ssd_pool_bench --dir /var/tmp --share 1536MiB --object 4MiB --reps 5
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

// A master and a store with an SSD tier, in this process, and two clients of them: one that
// reads same-host segments and tier files itself (shm), one that goes through the store (tcp).
struct Pool {
  std::unique_ptr<master::MasterServer> master;
  std::unique_ptr<store::StorageService> store;
  std::unique_ptr<client::Client> same_host, over_tcp;
  std::string tier_path;

  static Pool Start(const std::string& dir, const std::string& name, bool promote_on_hit, size_t count,
                    uint64_t object) {
    Pool p;
    master::MasterOptions mo;
    mo.listen = "127.0.0.1:0";
    mo.metrics_listen = "";
    // The share is 0.4 of the segment: putting it moves nothing; putting as much again passes
    // the watermark by exactly the share, which is the older, so all of it goes to SSD. (Not
    // 0.5 of a segment twice its size: the allocator cannot fill a segment to its last byte.)
    mo.high_watermark = 0.4;
    mo.maintenance_interval_ms = 10;
    mo.promote_on_hit = promote_on_hit;
    auto master = master::MasterServer::Start(mo);
    if (!master.ok()) Fail(master.status().ToString());
    p.master = std::move(master).value();
    p.tier_path = dir + "/kvpool-ssd-pool-bench-" + name + ".tier";
    std::filesystem::remove(p.tier_path);  // a file an earlier run left would bring its objects back
    store::StorageOptions so;
    so.master_address = p.master->address();
    so.store_id = "bench-" + name;
    so.memory_bytes = count * object * 5 / 2;
    so.ssd_path = p.tier_path;
    so.ssd_bytes = 2 * count * (object + ssd::SsdTier::kHeaderBytes) + (uint64_t{1} << 20);
    so.ssd_max_object_bytes = object;
    auto store = store::StorageService::Start(so);
    if (!store.ok()) Fail(store.status().ToString());
    p.store = std::move(store).value();
    for (bool shm : {true, false}) {
      client::ClientOptions co;
      co.pool = client::PoolParts::Single(p.master->address());
      co.lease = std::chrono::milliseconds(2000);  // a leased object is not demoted: let the DRAM read's end soon
      co.transfer.allow_shm = shm;
      auto client = client::Client::Connect(co);
      if (!client.ok()) Fail(client.status().ToString());
      (shm ? p.same_host : p.over_tcp) = std::move(client).value();
    }
    return p;
  }

  master::TierStats tiers() const { return master->pool()->Stat().tiers; }

  // Puts `filler` (as much as the share): the background pass demotes the share to SSD.
  void PushToSsd(const std::vector<std::string>& filler, const std::vector<client::ValueView>& views, size_t count) {
    const uint64_t before = tiers().demotions;
    const auto filled = same_host->BatchPut(filler, views);
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
  }

  // Removed objects still leased free their bytes when the lease ends: the next repetition
  // starts on an empty segment, or those frees would stop its demotion short.
  void RemoveAll(const std::vector<std::string>& keys, const std::vector<std::string>& filler) {
    std::vector<std::string> all = keys;
    all.insert(all.end(), filler.begin(), filler.end());
    (void)same_host->BatchRemove(all);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (master->pool()->Stat().used_bytes > 0 || tiers().ssd_objects > 0) {
      if (std::chrono::steady_clock::now() > deadline) Fail("the pool did not empty");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void Stop() {
    same_host.reset();
    over_tcp.reset();
    store->Stop();
    master->Shutdown();
    std::filesystem::remove(tier_path);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("One stage's share read back through the pool from DRAM and from the SSD tier");
  std::string dir = "/var/tmp", share_text = "1536MiB", object_text = "4MiB";
  int reps = 5;
  app.add_option("--dir", dir, "folder of the SSD tiers' files (a real disk)")->capture_default_str();
  app.add_option("--share", share_text, "bytes of the share")->capture_default_str();
  app.add_option("--object", object_text, "bytes per object")->capture_default_str();
  app.add_option("--reps", reps, "repetitions")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const auto share = ParseByteSize(share_text), object = ParseByteSize(object_text);
  if (!share.ok() || !object.ok() || *object == 0 || *share < *object) Fail("bad --share or --object");
  const size_t count = *share / *object;

  Pool direct = Pool::Start(dir, "direct", false, count, *object);
  Pool promoting = Pool::Start(dir, "promote", true, count, *object);
  std::vector<std::string> values(count, std::string(*object, '\0')), out(count, std::string(*object, '\0'));
  std::vector<client::ValueBuffer> buffers;
  for (auto& o : out) buffers.push_back(std::as_writable_bytes(std::span(o)));

  std::vector<double> dram_s, file_s, tcp_s, promote_s;
  for (int rep = 0; rep < reps; ++rep) {
    for (Pool* pool : {&direct, &promoting}) {
      std::vector<std::string> keys, filler;
      std::vector<client::ValueView> views;
      for (size_t i = 0; i < count; ++i) {
        keys.push_back(fmt::format("bench/r{}/share{}", rep, i));
        filler.push_back(fmt::format("bench/r{}/filler{}", rep, i));
        Fill(values[i], rep * count + i);
        views.push_back(std::as_bytes(std::span(values[i])));
      }
      // Reads every key of the share with `client`; its seconds. Fails unless each object came
      // back as it was put, from SSD when `from_ssd` (every one a lookup's SSD hit).
      auto read = [&](client::Client& client, const char* from, bool from_ssd) {
        for (auto& o : out) std::fill(o.begin(), o.end(), '\0');
        const uint64_t hits_before = pool->tiers().ssd_hits;
        const auto t0 = std::chrono::steady_clock::now();
        const auto got = client.BatchGetInto(keys, buffers);
        const double seconds = Seconds(std::chrono::steady_clock::now() - t0).count();
        for (size_t i = 0; i < count; ++i) {
          if (!got[i].ok()) Fail(fmt::format("read from {}: {}", from, got[i].status().ToString()));
          if (out[i] != values[i]) Fail(fmt::format("read from {}: object {} differs from what was put", from, i));
        }
        if (from_ssd && pool->tiers().ssd_hits - hits_before != count) {
          Fail(fmt::format("read from {}: not every object of the share was on SSD", from));
        }
        return seconds;
      };
      for (const Status& s : pool->same_host->BatchPut(keys, views)) {
        if (!s.ok()) Fail("put: " + s.ToString());
      }
      const double dram = read(*pool->same_host, "DRAM", false);
      if (pool == &direct) dram_s.push_back(dram);
      std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // past the DRAM read's leases
      pool->PushToSsd(filler, views, count);
      if (pool == &direct) {
        file_s.push_back(read(*pool->same_host, "the tier's file, same host", true));
        tcp_s.push_back(read(*pool->over_tcp, "the tier's file, over tcp", true));
      } else {
        promote_s.push_back(read(*pool->same_host, "SSD through a load into DRAM", true));
      }
      pool->RemoveAll(keys, filler);
    }
  }
  const double bytes = static_cast<double>(count * *object);
  const auto gbps = [&](const std::vector<double>& s) { return bytes / Median(s) / 1e9; };
  nlohmann::json j{{"share_bytes", count * *object}, {"object_bytes", *object}, {"objects", count},
                   {"reps", reps},
                   {"dram_seconds", dram_s}, {"ssd_file_seconds", file_s}, {"ssd_tcp_seconds", tcp_s},
                   {"ssd_promote_seconds", promote_s},
                   {"dram_gbps_median", gbps(dram_s)}, {"ssd_file_gbps_median", gbps(file_s)},
                   {"ssd_tcp_gbps_median", gbps(tcp_s)}, {"ssd_promote_gbps_median", gbps(promote_s)},
                   {"promotions", promoting.tiers().promotions},
                   {"promotion_failures", promoting.tiers().promotion_failures},
                   {"direct_pool_promotions", direct.tiers().promotions},
                   {"checksum_mismatches", direct.same_host->checksum_mismatches() +
                                               direct.over_tcp->checksum_mismatches() +
                                               promoting.same_host->checksum_mismatches()}};
  std::printf("%s\n", j.dump().c_str());
  direct.Stop();
  promoting.Stop();
  return 0;
}
