// kvpool serve: the embedded default — a master and one storage service in one process.
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "cli/security_flags.h"
#include "cli/shutdown_signal.h"
#include "master/master_server.h"
#include "store/storage_service.h"

namespace kvpool::cli {

void AddMasterOptions(CLI::App* cmd, master::MasterOptions& o);
void AddStoreOptions(CLI::App* cmd, store::StorageOptions& o);

std::string MetricsUrl(const master::MasterOptions& options, const master::MasterServer& server);

void AddServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Run a master and one storage service in this process");
  static master::MasterOptions master_options;
  static store::StorageOptions store_options;
  master_options.listen = "127.0.0.1:50051";
  master_options.metrics_listen = "127.0.0.1:9464";
  store_options.memory_bytes = uint64_t{1} << 30;
  store_options.tcp_listen = "127.0.0.1:0";
  AddByteSizeOption(cmd, "--memory", store_options.memory_bytes, "pool size");
  AddMasterOptions(cmd, master_options);
  auto* store_group = cmd->add_option_group("store");
  store_group->add_option("--store-listen", store_options.tcp_listen, "store transfer (tcp) address")
      ->check(HostPort())->capture_default_str();
  store_group->add_option("--shm-dir", store_options.shm_socket_dir, "folder for the shm unix socket")->capture_default_str();
  store_group->add_flag_function("--no-huge-pages", [](int64_t n) { store_options.use_huge_pages = n <= 0; },
                                 "back the segment with 4K pages only");
  static SecurityFlags security;
  AddAuthFileFlag(cmd, security);
  AddConfigFile(cmd);
  cmd->callback([cmd] {
    if (PrintedConfig(cmd)) return;
    auto secret = LoadPoolSecret(security.auth_file);
    if (!secret.ok()) {
      spdlog::error("kvpool serve: {}", secret.status().ToString());
      ExitCode() = 2;
      return;
    }
    master_options.security.secret = *secret;
    store_options.credentials.secret = *secret;
    auto master = master::MasterServer::Start(master_options);
    if (!master.ok()) {
      spdlog::error("cannot start the master: {}", master.status().ToString());
      ExitCode() = 1;
      return;
    }
    store_options.master_address = (*master)->address();
    auto store = store::StorageService::Start(store_options);
    if (!store.ok()) {
      spdlog::error("cannot start the storage service: {}", store.status().ToString());
      (*master)->Shutdown();
      ExitCode() = 1;
      return;
    }
    spdlog::info("kvpool serving {} on {} (metrics: {})", FormatByteSize(store_options.memory_bytes),
                 (*master)->address(), MetricsUrl(master_options, **master));
    const int sig = WaitForShutdownSignal();
    spdlog::info("signal {}: shutting down", sig);
    (*store)->Stop();
    (*master)->Shutdown();
  });
}

}  // namespace kvpool::cli
