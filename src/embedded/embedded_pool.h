// EmbeddedPool: a whole pool inside this process — a master and one storage service on
// loopback, the store's shm socket in a private temporary folder. For single-host use where
// starting separate services is not wanted: the Python `LocalPool`, the replay's default
// deployment, benchmarks and tests. Clients connect to address() like to any master.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/shared_secret.h"
#include "common/status.h"

// Declared only, so that including this header needs no gRPC headers (the Python module is
// built on machines without them); include master/master_server.h or store/storage_service.h
// to use master() or store().
namespace kvpool::master {
class MasterServer;
}
namespace kvpool::store {
class StorageService;
}

namespace kvpool::embedded {

struct EmbeddedPoolOptions {
  uint64_t memory_bytes = uint64_t{256} << 20;  // the store's segment
  uint64_t lease_ms = 5000;                     // the master's default read lease
  double max_retained_fraction = 0.5;           // the master's bound on retention hints
  bool use_huge_pages = false;                  // hugetlb/THP for the segment when available
  std::chrono::milliseconds heartbeat_interval{200};
  // The pool's one clock: the master's leases, recency, retention and eviction passes and the
  // store's heartbeats run on it (the replay passes its simulation's). REQUIRES: outlives the pool.
  Clock* clock = SteadyClock::Get();
  // Each maintenance pass ends with its SSD moves done (MasterOptions::settle_each_pass,
  // StorageOptions::ssd_demote_inline): with `clock` emulated, the pool's results then depend
  // on the order of its calls alone, not on how fast its threads ran.
  bool settled_passes = false;
  uint32_t part = 0;                            // the pool part the master (and its store) serve
  std::optional<SharedSecret> secret = {};      // the master and the store ask every caller for it
  // An SSD tier under the segment (issue 17): the master demotes objects there instead of
  // dropping them. 0: none. The file is created in `ssd_dir` (the private temporary folder
  // when empty) and removed with the pool.
  uint64_t ssd_bytes = 0;
  uint64_t ssd_max_object_bytes = uint64_t{8} << 20;
  std::string ssd_dir;
};

class EmbeddedPool {
 public:
  // Starts the master, then the store (which pre-faults its segment and mounts it).
  static Result<std::unique_ptr<EmbeddedPool>> Start(const EmbeddedPoolOptions& options);
  ~EmbeddedPool();  // stops the store, then the master; removes the temporary folder
  EmbeddedPool(const EmbeddedPool&) = delete;
  EmbeddedPool& operator=(const EmbeddedPool&) = delete;

  // "127.0.0.1:port" of the master.
  std::string address() const;
  master::MasterServer& master() { return *master_; }
  store::StorageService& store() { return *store_; }

 private:
  EmbeddedPool() = default;
  std::filesystem::path dir_;
  std::filesystem::path ssd_file_;  // empty without an SSD tier
  std::unique_ptr<master::MasterServer> master_;
  std::unique_ptr<store::StorageService> store_;
};

}  // namespace kvpool::embedded
