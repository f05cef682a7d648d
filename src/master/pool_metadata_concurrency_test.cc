// Several threads hammer one PoolMetadata with puts, reads, removes, eviction, expiring
// stores and remounts. Run under -DKVPOOL_SANITIZE=thread to catch races; the checks at the
// end catch lost or double-booked space.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "master/pool_metadata.h"

namespace kvpool::master {
namespace {

TEST(PoolMetadataConcurrencyTest, HammerKeepsSpaceConsistent) {
  ManualClock clock;
  PoolOptions options;
  options.shards = 8;
  options.evict_fraction = 0.05;
  PoolMetadata pool(options, &clock);
  auto mount = [&](const std::string& store) {
    SegmentInfo info;
    info.store_id = store;
    info.size = 256 << 10;  // small, so eviction runs all the time
    return pool.MountSegment(info)->id;
  };
  mount("store-0");
  mount("store-1");
  mount("store-2");

  constexpr int kWorkers = 4;
  constexpr int kOpsPerWorker = 20000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> put_ok{0}, no_space{0};

  auto worker = [&](int id) {
    std::mt19937 rng(id);
    for (int op = 0; op < kOpsPerWorker; ++op) {
      std::string key = "k" + std::to_string(rng() % 2000);
      std::string_view view = key;
      switch (rng() % 6) {
        case 0:
        case 1: {
          PutOptions put_options;
          put_options.replicas = 1 + rng() % 2;
          if (rng() % 3 == 0) put_options.group = "g" + std::to_string(rng() % 50);
          if (rng() % 5 == 0) put_options.pin_ttl_ms = 100;
          PutStartItem item{key, 1 + rng() % 8192};
          auto started = pool.BatchPutStart({&item, 1}, put_options);
          if (started.results[0].status.ok()) {
            if (rng() % 10 == 0) {
              pool.BatchPutRevoke({&view, 1});
            } else if (pool.BatchPutEnd({&view, 1})[0].ok()) {
              put_ok.fetch_add(1);
            }
          } else if (started.results[0].status.code() == StatusCode::kNoSpace) {
            no_space.fetch_add(1);
          }
          break;
        }
        case 2:
        case 3: {
          auto got = pool.BatchGetReplicas({&view, 1}, 1 + rng() % 20);
          if (got.results[0].status.ok()) {
            EXPECT_FALSE(got.results[0].replicas.empty());
          }
          break;
        }
        case 4: {
          std::string flags;
          pool.BatchExists({&view, 1}, &flags);
          break;
        }
        default:
          pool.BatchRemove({&view, 1});
      }
    }
  };

  std::thread background([&] {
    int round = 0;
    while (!stop.load()) {
      clock.AdvanceMs(1);
      pool.Heartbeat("store-0", {});
      pool.Heartbeat("store-1", {});
      pool.RunMaintenance();
      if (++round % 50 == 0) pool.EvictAtLeast(32 << 10);
      if (round % 200 == 0) {
        // store-2 misses heartbeats now and then: its segment expires and it remounts.
        clock.AdvanceMs(options.heartbeat_ttl_ms + 1);
        pool.Heartbeat("store-0", {});
        pool.Heartbeat("store-1", {});
        pool.RunMaintenance();
        mount("store-2");
      }
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) workers.emplace_back(worker, i);
  for (auto& t : workers) t.join();
  stop.store(true);
  background.join();

  EXPECT_GT(put_ok.load(), 0u);
  auto stats = pool.Stat();
  EXPECT_GT(stats.evicted_objects, 0u);  // the pool is far smaller than the key space
  EXPECT_LE(stats.used_bytes, stats.capacity_bytes);

  // Live copies never overlap within a segment.
  std::map<uint64_t, std::map<uint64_t, uint64_t>> ranges;  // segment -> offset -> end
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  auto got = pool.BatchGetReplicas(views, 1);
  for (const auto& result : got.results) {
    if (!result.status.ok()) continue;
    for (const auto& r : result.replicas) {
      auto& segment = ranges[r.segment_id];
      auto next = segment.lower_bound(r.offset);
      if (next != segment.end()) {
        EXPECT_LE(r.offset + r.length, next->first);
      }
      if (next != segment.begin()) {
        EXPECT_LE(std::prev(next)->second, r.offset);
      }
      segment.emplace(r.offset, r.offset + r.length);
    }
  }

  // Remove everything, let every lease and pending put run out: all space comes back.
  clock.AdvanceMs(options.put_timeout_ms + options.max_lease_ms);
  for (const char* store : {"store-0", "store-1", "store-2"}) pool.Heartbeat(store, {});
  pool.BatchRemove(views);
  pool.RunMaintenance();
  stats = pool.Stat();
  // The stores heartbeated, so their segments are still here to be checked.
  EXPECT_GE(stats.segments.size(), 2u);
  EXPECT_EQ(stats.objects, 0u);
  EXPECT_EQ(stats.used_bytes, 0u);
  for (const auto& segment : stats.segments) EXPECT_EQ(segment.objects, 0u);
}

}  // namespace
}  // namespace kvpool::master
