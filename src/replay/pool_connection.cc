#include "replay/pool_connection.h"

#include <fmt/format.h>

#include "common/byte_size.h"
#include "embedded/embedded_pool.h"
#include "master/master_server.h"
#include "master/pool_metadata.h"

namespace kvpool::replay {

PoolConnection::~PoolConnection() {
  // Clients first: the pool they talk to goes next.
  chunk_store_.reset();
  client_.reset();
  embedded_.clear();
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::StartEmbedded(const EmbeddedPoolSpec& spec) {
  const uint32_t parts = spec.parts;
  if (parts == 0) return InvalidArgument("an embedded pool needs at least one part");
  constexpr uint64_t kAlign = uint64_t{2} << 20;
  std::vector<std::unique_ptr<embedded::EmbeddedPool>> started;
  client::PoolParts list;
  embedded::EmbeddedPoolOptions eo;
  eo.memory_bytes = (spec.memory_bytes / parts + kAlign - 1) / kAlign * kAlign;
  eo.ssd_bytes = spec.ssd.bytes / parts;
  eo.ssd_max_object_bytes = spec.ssd.max_object_bytes;
  eo.ssd_dir = spec.ssd.dir;
  eo.max_retained_fraction = spec.max_retained_fraction;
  eo.clock = spec.clock;
  eo.settled_passes = spec.clock != SteadyClock::Get();
  // A store's default beat: on an emulated clock each one is a real round trip, and the
  // master's 5 s ttl needs no more.
  eo.heartbeat_interval = std::chrono::seconds(1);
  for (uint32_t k = 0; k < parts; ++k) {
    eo.part = k;
    auto pool = embedded::EmbeddedPool::Start(eo);
    if (!pool.ok()) return pool.status();
    list.masters.push_back((*pool)->address());
    started.push_back(std::move(pool).value());
  }
  auto p = Connect(list, {}, spec.read_lease);
  if (!p.ok()) return p.status();
  (*p)->embedded_ = std::move(started);
  (*p)->description_ = parts == 1 ? fmt::format("embedded pool ({}) on {}", FormatByteSize(eo.memory_bytes),
                                                list.masters[0])
                                  : fmt::format("embedded pool of {} parts ({} each)", parts,
                                                FormatByteSize(eo.memory_bytes));
  if (eo.ssd_bytes > 0) (*p)->description_ += fmt::format(", SSD tier {} a part", FormatByteSize(eo.ssd_bytes));
  return p;
}

std::optional<PoolCounters> PoolConnection::counters() const {
  if (embedded_.empty()) return std::nullopt;
  PoolCounters sum;
  for (const auto& part : embedded_) {
    const master::PoolStats s = part->master().pool()->Stat();
    sum += PoolCounters{.capacity_bytes = s.capacity_bytes,
                        .ssd_capacity_bytes = s.tiers.ssd_capacity_bytes,
                        .used_bytes = s.used_bytes,
                        .ssd_used_bytes = s.tiers.ssd_used_bytes,
                        .evicted_objects = s.evicted_objects,
                        .demotions = s.tiers.demotions,
                        .demotion_failures = s.tiers.demotion_failures,
                        .promotions = s.tiers.promotions,
                        .promotion_failures = s.tiers.promotion_failures,
                        .ssd_hits = s.tiers.ssd_hits,
                        .ssd_evictions = s.tiers.ssd_evictions};
  }
  return sum;
}

Result<std::unique_ptr<PoolConnection>> PoolConnection::Connect(const client::PoolParts& pool,
                                                               proto::RpcCredentials credentials,
                                                               std::chrono::milliseconds read_lease,
                                                               const transfer::UcxSettings& ucx) {
  std::unique_ptr<PoolConnection> p(new PoolConnection());
  client::ClientOptions co;
  co.pool = pool;
  co.transfer.ucx = ucx;
  co.credentials = std::move(credentials);
  co.lease = read_lease;
  auto client = client::Client::Connect(co);
  if (!client.ok()) return client.status();
  p->client_ = std::move(client).value();
  p->chunk_store_ = std::make_unique<connector::PoolChunkStore>(p->client_.get());
  p->description_ = pool.size() == 1 ? "pool at " + pool.masters[0]
                                     : fmt::format("pool of {} parts ({})", pool.size(), pool.ToString());
  return p;
}

}  // namespace kvpool::replay
