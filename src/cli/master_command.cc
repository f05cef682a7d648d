// kvpool master: the metadata service (object index, allocation, leases, eviction).
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/shutdown_signal.h"
#include "master/master_server.h"

namespace kvpool::cli {

void AddMasterOptions(CLI::App* cmd, master::MasterOptions& o) {
  cmd->add_option("--listen", o.listen, "gRPC address to listen on")->check(HostPort())->capture_default_str();
  cmd->add_option("--metrics-listen", o.metrics_listen, "HTTP address for /metrics and /health (\"\" disables)")
      ->capture_default_str();
  cmd->add_option("--part", o.part, "pool part this master serves (stores and clients check it)")
      ->check(CLI::Range(0, 1023))->capture_default_str();
  cmd->add_option("--high-watermark", o.high_watermark, "evict when used/capacity passes this")
      ->check(CLI::Range(0.01, 1.0))->capture_default_str();
  cmd->add_option("--evict-fraction", o.evict_fraction, "fraction of capacity one eviction pass frees")
      ->check(CLI::Range(0.001, 1.0))->capture_default_str();
  cmd->add_option("--lease-ms", o.default_lease_ms, "read lease length")->check(CLI::Range(1, 3'600'000))->capture_default_str();
  cmd->add_option("--put-timeout-ms", o.put_timeout_ms, "unfinished puts are reclaimed after this")
      ->check(CLI::Range(100, 3'600'000))->capture_default_str();
  cmd->add_option("--heartbeat-ttl-ms", o.heartbeat_ttl_ms, "a store silent this long is dropped")
      ->check(CLI::Range(100, 3'600'000))->capture_default_str();
}

// "http://HOST:PORT/metrics" with the port actually bound, or "off".
std::string MetricsUrl(const master::MasterOptions& options, const master::MasterServer& server) {
  if (options.metrics_listen.empty()) return "off";
  const std::string host = options.metrics_listen.substr(0, options.metrics_listen.rfind(':'));
  return "http://" + host + ":" + std::to_string(server.metrics_port()) + "/metrics";
}

void AddMasterCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("master", "Run the metadata service");
  static master::MasterOptions options;
  AddMasterOptions(cmd, options);
  cmd->callback([] {
    auto server = master::MasterServer::Start(options);
    if (!server.ok()) {
      spdlog::error("cannot start the master: {}", server.status().ToString());
      ExitCode() = 1;
      return;
    }
    spdlog::info("kvpool master of part {} listening on {} (metrics: {})", options.part, (*server)->address(),
                 MetricsUrl(options, **server));
    const int sig = WaitForShutdownSignal();
    spdlog::info("signal {}: shutting down", sig);
    (*server)->Shutdown();
  });
}

}  // namespace kvpool::cli
