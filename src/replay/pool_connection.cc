#include "replay/pool_connection.h"

#include <fmt/format.h>

#include "common/byte_size.h"
#include "embedded/embedded_pool.h"

namespace kvpool::replay {

PoolConnection::~PoolConnection() {
  // Clients first: the pool they talk to goes next.
  chunk_store_.reset();
  client_.reset();
  embedded_.clear();
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::StartEmbedded(uint64_t memory_bytes, uint32_t parts) {
  if (parts == 0) return InvalidArgument("an embedded pool needs at least one part");
  constexpr uint64_t kAlign = uint64_t{2} << 20;
  std::vector<std::unique_ptr<embedded::EmbeddedPool>> started;
  client::PoolParts list;
  embedded::EmbeddedPoolOptions eo;
  eo.memory_bytes = (memory_bytes / parts + kAlign - 1) / kAlign * kAlign;
  for (uint32_t k = 0; k < parts; ++k) {
    eo.part = k;
    auto pool = embedded::EmbeddedPool::Start(eo);
    if (!pool.ok()) return pool.status();
    list.masters.push_back((*pool)->address());
    started.push_back(std::move(pool).value());
  }
  auto p = Connect(list);
  if (!p.ok()) return p.status();
  (*p)->embedded_ = std::move(started);
  (*p)->description_ = parts == 1 ? fmt::format("embedded pool ({}) on {}", FormatByteSize(eo.memory_bytes),
                                                list.masters[0])
                                  : fmt::format("embedded pool of {} parts ({} each)", parts,
                                                FormatByteSize(eo.memory_bytes));
  return p;
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::Connect(const client::PoolParts& pool,
                                                               proto::RpcCredentials credentials) {
  std::unique_ptr<PoolConnection> p(new PoolConnection());
  client::ClientOptions co;
  co.pool = pool;
  co.credentials = std::move(credentials);
  auto client = client::Client::Connect(co);
  if (!client.ok()) return client.status();
  p->client_ = std::move(client).value();
  p->chunk_store_ = std::make_unique<connector::PoolChunkStore>(p->client_.get());
  p->description_ = pool.size() == 1 ? "pool at " + pool.masters[0]
                                     : fmt::format("pool of {} parts ({})", pool.size(), pool.ToString());
  return p;
}

}  // namespace kvpool::replay
