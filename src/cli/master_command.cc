// kvpool master: the metadata service (object index, allocation, leases, eviction).
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "cli/security_flags.h"
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
  cmd->add_option("--max-retained-fraction", o.max_retained_fraction,
                  "a router's retention hints keep at most this share of the eviction units over the rest; the "
                  "rest stays plain LRU (clients that send no hints). Where one router fronts every client of "
                  "the pool, 0.9 lets hints rank almost all of it")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--lease-ms", o.default_lease_ms, "read lease length")->check(CLI::Range(1, 3'600'000))->capture_default_str();
  cmd->add_option("--put-timeout-ms", o.put_timeout_ms, "unfinished puts are reclaimed after this")
      ->check(CLI::Range(100, 3'600'000))->capture_default_str();
  cmd->add_option("--heartbeat-ttl-ms", o.heartbeat_ttl_ms, "a store silent this long is dropped")
      ->check(CLI::Range(100, 3'600'000))->capture_default_str();
  cmd->add_option("--etcd", o.etcd,
                  "etcd endpoints HOST:PORT[,HOST:PORT...]: run as one of several masters of the part, leading "
                  "only while etcd's election names it (env KVPOOL_ETCD)")
      ->envname("KVPOOL_ETCD");
  cmd->add_option("--advertise", o.advertise,
                  "with --etcd: the gRPC HOST:PORT clients and stores are sent to (default: the listen address)")
      ->check(HostPort());
  cmd->add_option("--leader-ttl-s", o.leader_ttl_s, "with --etcd: the leader's lease; a dead leader is replaced "
                                                     "within about this long")
      ->check(CLI::Range(2, 600))->capture_default_str();
  cmd->add_option("--takeover-grace-ms", o.takeover_grace_ms,
                  "with --etcd: a new leader answers only stores until every store registered in etcd has "
                  "rejoined, and at most this long (for a store that died with the leader and whose "
                  "registration has not expired yet)")
      ->check(CLI::Range(0, 60'000))->capture_default_str();
  cmd->add_option_function<std::vector<std::string>>(
      "--namespace-quota",
      [&o](const std::vector<std::string>& specs) {
        for (const std::string& spec : specs) {
          const size_t eq = spec.rfind('=');
          Result<uint64_t> bytes = eq == std::string::npos ? Result<uint64_t>(InvalidArgument("expected NAMESPACE=SIZE"))
                                                           : ParseByteSize(spec.substr(eq + 1));
          if (!bytes.ok()) throw CLI::ValidationError("--namespace-quota", spec + ": " + bytes.status().message());
          o.namespace_quotas.bytes[spec.substr(0, eq)] = *bytes;
        }
      },
      "NAMESPACE=SIZE, repeatable: the namespace (a key's part before its first '/'; a model's KV is one) may hold "
      "this many value bytes, and evicts its own objects first to stay within it");
  cmd->add_flag("--promote-on-hit", o.promote_on_hit,
               "a lookup that finds objects in a store's SSD tier loads them back into its DRAM segment first "
               "(they are hot again) instead of sending the client to read them from the tier's file")
      ->capture_default_str();
  AddByteSizeOption(cmd, "--default-namespace-quota", o.namespace_quotas.default_bytes,
                    "the quota of every namespace not named by --namespace-quota (0: none)");
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
  static SecurityFlags security;
  AddMasterOptions(cmd, options);
  AddServerSecurityFlags(cmd, security);
  AddConfigFile(cmd);
  cmd->callback([cmd] {
    if (PrintedConfig(cmd)) return;
    auto loaded = ServerSecurity(security);
    if (!loaded.ok()) {
      spdlog::error("cannot start the master: {}", loaded.status().ToString());
      ExitCode() = 2;
      return;
    }
    options.security = *std::move(loaded);
    auto server = master::MasterServer::Start(options);
    if (!server.ok()) {
      spdlog::error("cannot start the master: {}", server.status().ToString());
      ExitCode() = 1;
      return;
    }
    spdlog::info("kvpool master of part {} listening on {}{}{} (metrics: {}{})", options.part, (*server)->address(),
                 options.security.tls_cert_pem.empty() ? "" : ", TLS",
                 options.security.secret ? ", callers must prove the pool's secret" : "", MetricsUrl(options, **server),
                 options.etcd.empty() ? "" : "; campaigning for leadership in etcd " + options.etcd);
    const int sig = WaitForShutdownSignal();
    spdlog::info("signal {}: shutting down", sig);
    (*server)->HandOver();
    (*server)->Shutdown();
  });
}

}  // namespace kvpool::cli
