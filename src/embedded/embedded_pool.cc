#include "embedded/embedded_pool.h"

#include <cstdlib>

#include "master/master_server.h"
#include "store/storage_service.h"

namespace kvpool::embedded {

Result<std::unique_ptr<EmbeddedPool>> EmbeddedPool::Start(const EmbeddedPoolOptions& options) {
  std::unique_ptr<EmbeddedPool> pool(new EmbeddedPool);
  char pattern[] = "/tmp/kvpool-embedded-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return Internal("cannot create a temporary folder for the store's shm socket");
  pool->dir_ = pattern;
  master::MasterOptions mo;
  mo.listen = "127.0.0.1:0";
  mo.metrics_listen = "";
  mo.default_lease_ms = options.lease_ms;
  mo.max_retained_fraction = options.max_retained_fraction;
  mo.part = options.part;
  mo.security.secret = options.secret;
  mo.settle_each_pass = options.settled_passes;
  auto master = master::MasterServer::Start(mo, options.clock);
  if (!master.ok()) return master.status();  // the destructor removes the folder
  pool->master_ = std::move(master).value();
  store::StorageOptions so;
  so.master_address = pool->master_->address();
  so.part = options.part;
  so.memory_bytes = options.memory_bytes;
  so.tcp_listen = "127.0.0.1:0";
  so.shm_socket_dir = pool->dir_.string();
  so.use_huge_pages = options.use_huge_pages;
  so.heartbeat_interval = options.heartbeat_interval;
  so.clock = options.clock;
  // The index a store keeps outlives a master that restarts; this one's master dies with it.
  // Only an SSD tier needs it (its moves come through the index's journal).
  so.keep_index = options.ssd_bytes > 0;
  so.credentials.secret = options.secret;
  if (options.ssd_bytes > 0) {
    // One file per pool, named after its private folder, so that pools sharing ssd_dir never
    // open each other's tier.
    const std::filesystem::path where = options.ssd_dir.empty() ? pool->dir_ : std::filesystem::path(options.ssd_dir);
    pool->ssd_file_ = where / (pool->dir_.filename().string() + ".ssd");
    so.ssd_path = pool->ssd_file_.string();
    so.ssd_bytes = options.ssd_bytes;
    so.ssd_max_object_bytes = options.ssd_max_object_bytes;
    so.ssd_demote_inline = options.settled_passes;
  }
  auto store = store::StorageService::Start(so);
  if (!store.ok()) return store.status();
  pool->store_ = std::move(store).value();
  return pool;
}

std::string EmbeddedPool::address() const { return master_->address(); }

EmbeddedPool::~EmbeddedPool() {
  store_.reset();
  if (master_) master_->Shutdown();
  master_.reset();
  std::error_code ignored;
  if (!ssd_file_.empty()) std::filesystem::remove(ssd_file_, ignored);
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

}  // namespace kvpool::embedded
