// PoolConnection: the pool a replay saves to and restores from — either embedded (one
// embedded::EmbeddedPool per part: a master and one storage service in this process on
// loopback, sized for the run) or an existing pool reached through its masters (one per part).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/clock.h"
#include "common/status.h"
#include "connector/chunk_store.h"
#include "replay/replay_metrics.h"

namespace kvpool::embedded {
class EmbeddedPool;
}

namespace kvpool::replay {

// An SSD tier under every embedded part's segment (issue 17).
struct EmbeddedSsd {
  uint64_t bytes = 0;  // the tiers' files, all parts together; 0: none
  uint64_t max_object_bytes = uint64_t{8} << 20;
  std::string dir;  // where the files go; "": each part's temporary folder
};

// What StartEmbedded starts.
struct EmbeddedPoolSpec {
  uint64_t memory_bytes = 0;
  uint32_t parts = 1;
  EmbeddedSsd ssd;
  std::chrono::milliseconds read_lease{0};  // what the client's lookups ask for (0: the master's default)
  double max_retained_fraction = 0.5;       // each master's bound on retention hints (master::PoolOptions)
  // The pool's one clock (the replay's simulation); REQUIRES: outlives the connection. Its
  // maintenance passes are settled (EmbeddedPoolOptions::settled_passes) when it is not the
  // steady clock.
  Clock* clock = SteadyClock::Get();
};

class PoolConnection {
 public:
  // `parts` fresh masters, each with a storage service of memory_bytes / parts (4K pages, no
  // huge pages needed) and, with `ssd`, an SSD tier of ssd.bytes / parts.
  static Result<std::unique_ptr<PoolConnection>> StartEmbedded(const EmbeddedPoolSpec& spec);
  static Result<std::unique_ptr<PoolConnection>> Connect(const client::PoolParts& pool,
                                                         proto::RpcCredentials credentials = {},
                                                         std::chrono::milliseconds read_lease = {},
                                                         const transfer::UcxSettings& ucx = {});
  ~PoolConnection();
  PoolConnection(const PoolConnection&) = delete;
  PoolConnection& operator=(const PoolConnection&) = delete;

  connector::ChunkStore* store() { return chunk_store_.get(); }
  const std::string& description() const { return description_; }
  // The sizes of the requests this process's client gave its transfer engine.
  const transfer::TransferMetrics& transfer_metrics() const { return client_->transfer_engine().metrics(); }
  // The embedded masters' counters, all parts together; nullopt for an existing pool.
  std::optional<PoolCounters> counters() const;

 private:
  PoolConnection() = default;
  std::vector<std::unique_ptr<embedded::EmbeddedPool>> embedded_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<connector::PoolChunkStore> chunk_store_;
  std::string description_;
};

}  // namespace kvpool::replay
