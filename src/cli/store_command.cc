// kvpool store: contributes a memory segment to the pool and serves its bytes.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "cli/pool_flags.h"
#include "cli/shutdown_signal.h"
#include "store/storage_service.h"

#ifdef KVPOOL_FAULT_HOOKS
#include <signal.h>

#include <random>

#include "store/test_corruption.h"
#endif

namespace kvpool::cli {

#ifdef KVPOOL_FAULT_HOOKS
constexpr uint64_t kFaultHookFlips = 16;  // objects that go bad per SIGUSR2
#endif

void AddStoreOptions(CLI::App* cmd, store::StorageOptions& o) {
  cmd->add_option("--listen", o.tcp_listen, "transfer (tcp) address to listen on")->check(HostPort())->capture_default_str();
  cmd->add_option("--advertise-host", o.advertise_host, "host clients on other machines use to reach this store");
  cmd->add_option("--shm-dir", o.shm_socket_dir, "folder for the same-host (shm) unix socket")->capture_default_str();
  // Negative flags as functions, not "!--flag": a configuration file and --print-config then
  // read `no-huge-pages = true` the way the command line means it (cli/config_file.h).
  cmd->add_flag_function("--no-huge-pages", [&o](int64_t n) { o.use_huge_pages = n <= 0; },
                         "back the segment with 4K pages only");
  cmd->add_option_function<int64_t>(
         "--heartbeat-interval-ms", [&o](int64_t ms) { o.heartbeat_interval = std::chrono::milliseconds(ms); },
         "how often to tell the master this store is alive (default 1000)")
      ->check(CLI::Range(10, 600'000));
  cmd->add_option_function<int64_t>(
         "--registration-ttl-s", [&o](int64_t s) { o.registration_ttl = std::chrono::seconds(s); },
         "with --etcd: how long this store stays in etcd's store registry after it stops renewing; a newly "
         "elected master waits for registered stores to rejoin before it answers clients (default 3)")
      ->check(CLI::Range(2, 600));
  cmd->add_flag_function("--no-index", [&o](int64_t n) { o.keep_index = n <= 0; },
                "keep no copy of the segment's index: puts do not wait for this store, and a master restart or "
                "failover loses its objects (for measuring what the index costs)");
  cmd->add_option("--io-threads", o.io_threads, "tcp transfer threads")->check(CLI::Range(1, 64))->capture_default_str();
}

void AddStoreCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("store", "Contribute memory to the pool (a storage service)");
  static store::StorageOptions options;
  static PoolFlags pool_flags;
  options.memory_bytes = uint64_t{1} << 30;
  AddPoolFlags(cmd, pool_flags, "master HOST:PORT of the part this store joins", PoolEnvironment::kRead,
               StageFlags::kNotTaken);
  cmd->add_option("--part", options.part, "pool part to join: its master is the pool list's entry K")
      ->check(CLI::Range(0, 1023))->capture_default_str();
  AddByteSizeOption(cmd, "--memory", options.memory_bytes, "segment size");
  AddStoreOptions(cmd, options);
  cmd->add_option("--ssd", options.ssd_path,
                  "file of an SSD tier under the segment: the master demotes objects there instead of evicting "
                  "them, and a store restarted on the same file brings them back (allocated whole, O_DIRECT)");
  cmd->add_option("--metrics-listen", options.metrics_listen,
                  "HTTP address for this store's /metrics and /health (e.g. 127.0.0.1:9465; \"\" for none)")
      ->capture_default_str();
  AddByteSizeOption(cmd, "--ssd-size", options.ssd_bytes, "size of the SSD tier's file (with --ssd)");
  AddByteSizeOption(cmd, "--ssd-max-object", options.ssd_max_object_bytes,
                    "largest object the SSD tier takes (its slot size, a multiple of 4KiB)");
  AddConfigFile(cmd);
  cmd->callback([cmd] {
    if (PrintedConfig(cmd)) return;
    auto named = ResolvePool(pool_flags);
    Result<client::PoolParts> pool = InvalidArgument("name the pool: --master, --pool, --pool-file or --etcd");
    if (!named.ok()) {
      pool = named.status();
    } else if (named->parts) {
      pool = *named->parts;
    }
    // A lone master (--master or KVPOOL_MASTER) is part K's master itself; a pool list must
    // have part K. With etcd, any part may be joined: its masters campaign in their own election.
    const bool direct = named.ok() && named->lone_master();
    if (pool.ok() && !direct && pool->etcd.empty() && options.part >= pool->size()) {
      pool = InvalidArgument(fmt::format("part {} is not in the pool (it has parts 0 to {}) that {} names", options.part,
                                         pool->size() - 1, named->source));
    }
    if (!pool.ok()) {
      spdlog::error("kvpool store: {}", pool.status().ToString());
      ExitCode() = 2;
      return;
    }
    auto credentials = ClientCredentials(pool_flags.security);
    if (auto pool_secret = LoadPoolSecret(pool_flags.security.auth_file); credentials.ok() && !pool_secret.ok()) {
      credentials = pool_secret.status();
    }
    if (!credentials.ok()) {
      spdlog::error("kvpool store: {}", credentials.status().ToString());
      ExitCode() = 2;
      return;
    }
    options.credentials = *std::move(credentials);
    auto ucx = TransportSettings(pool_flags);
    if (!ucx.ok()) {
      spdlog::error("kvpool store: {}", ucx.status().ToString());
      ExitCode() = 2;
      return;
    }
    options.ucx = *ucx;
    options.etcd = pool->etcd;
    if (options.etcd.empty()) options.master_address = direct ? pool->masters[0] : pool->masters[options.part];
    auto service = store::StorageService::Start(options);
    if (!service.ok()) {
      spdlog::error("cannot start the storage service: {}", service.status().ToString());
      ExitCode() = 1;
      return;
    }
    spdlog::info("kvpool store: {} segment {} of part {} (master {}) served on {}", FormatByteSize(options.memory_bytes),
                 (*service)->segment_id(), options.part,
                 options.etcd.empty() ? options.master_address : "elected in etcd " + options.etcd,
                 (*service)->tcp_address());
#ifdef KVPOOL_FAULT_HOOKS
    // A fault-hook build (scripts/soak.sh): every SIGUSR2 is a store whose memory went bad.
    std::mt19937_64 rng(std::random_device{}());
    int sig = 0;
    while ((sig = WaitForShutdownOrFaultSignal()) == SIGUSR2) {
      const uint64_t flipped = store::testing::FlipBitsOfRandomObjects(**service, rng, kFaultHookFlips);
      spdlog::warn("fault hook: flipped a bit in {} random objects of the segment", flipped);
    }
#else
    const int sig = WaitForShutdownSignal();
#endif
    spdlog::info("signal {}: unmounting and shutting down", sig);
    (*service)->Stop();
  });
}

}  // namespace kvpool::cli
