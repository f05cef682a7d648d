#include "replay/pool_connection.h"

#include <fmt/format.h>

#include "common/byte_size.h"
#include "embedded/embedded_pool.h"

namespace kvpool::replay {

PoolConnection::~PoolConnection() {
  // Clients first: the pool they talk to goes next.
  chunk_store_.reset();
  client_.reset();
  embedded_.reset();
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::StartEmbedded(uint64_t memory_bytes) {
  embedded::EmbeddedPoolOptions eo;
  eo.memory_bytes = (memory_bytes + (uint64_t{2} << 20) - 1) / (uint64_t{2} << 20) * (uint64_t{2} << 20);
  auto pool = embedded::EmbeddedPool::Start(eo);
  if (!pool.ok()) return pool.status();
  const std::string address = (*pool)->address();
  auto p = Connect(client::PoolParts::Single(address));
  if (!p.ok()) return p.status();
  (*p)->embedded_ = std::move(pool).value();
  (*p)->description_ = fmt::format("embedded pool ({}) on {}", FormatByteSize(eo.memory_bytes), address);
  return p;
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::Connect(const client::PoolParts& pool) {
  std::unique_ptr<PoolConnection> p(new PoolConnection());
  client::ClientOptions co;
  co.pool = pool;
  auto client = client::Client::Connect(co);
  if (!client.ok()) return client.status();
  p->client_ = std::move(client).value();
  p->chunk_store_ = std::make_unique<connector::PoolChunkStore>(p->client_.get());
  p->description_ = pool.size() == 1 ? "pool at " + pool.masters[0]
                                     : fmt::format("pool of {} parts ({})", pool.size(), pool.ToString());
  return p;
}

}  // namespace kvpool::replay
