// PoolConnection: the pool a replay saves to and restores from — either embedded (one
// embedded::EmbeddedPool per part: a master and one storage service in this process on
// loopback, sized for the run) or an existing pool reached through its masters (one per part).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "common/status.h"
#include "connector/chunk_store.h"

namespace kvpool::embedded {
class EmbeddedPool;
}

namespace kvpool::replay {

class PoolConnection {
 public:
  // `parts` fresh masters, each with a storage service of memory_bytes / parts (4K pages, no
  // huge pages needed).
  static Result<std::unique_ptr<PoolConnection>> StartEmbedded(uint64_t memory_bytes, uint32_t parts = 1);
  static Result<std::unique_ptr<PoolConnection>> Connect(const client::PoolParts& pool,
                                                         proto::RpcCredentials credentials = {});
  ~PoolConnection();
  PoolConnection(const PoolConnection&) = delete;
  PoolConnection& operator=(const PoolConnection&) = delete;

  connector::ChunkStore* store() { return chunk_store_.get(); }
  const std::string& description() const { return description_; }

 private:
  PoolConnection() = default;
  std::vector<std::unique_ptr<embedded::EmbeddedPool>> embedded_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<connector::PoolChunkStore> chunk_store_;
  std::string description_;
};

}  // namespace kvpool::replay
