#include "cli/pool_flags.h"

#include <cstdlib>

#include "cli/flags.h"

namespace kvpool::cli {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

void AddPoolFlags(CLI::App* cmd, PoolFlags& flags, const std::string& master_help, PoolEnvironment environment,
                  StageFlags stages) {
  flags.environment = environment;
  const bool env = environment == PoolEnvironment::kRead;
  auto* master = cmd->add_option("--master", flags.master, master_help + (env ? " (env KVPOOL_MASTER)" : ""))
                     ->check(HostPort());
  auto* pool = cmd->add_option("--pool", flags.pool, std::string("pool parts: part0=HOST:PORT,part1=HOST:PORT,...") +
                                                         (env ? " (env KVPOOL_POOL)" : ""));
  auto* file = cmd->add_option("--pool-file", flags.pool_file, "pool parts from a file: one `partK = HOST:PORT` per line");
  auto* etcd = cmd->add_option("--etcd", flags.etcd,
                               std::string("etcd endpoints HOST:PORT[,...]: follow the masters etcd elects") +
                                   (env ? " (env KVPOOL_ETCD)" : ""));
  cmd->add_option("--parts", flags.parts, "with --etcd: how many parts the pool has (default 1)")
      ->check(CLI::Range(1, 1024))->needs(etcd);
  master->excludes(pool)->excludes(file)->excludes(etcd);
  pool->excludes(file)->excludes(etcd);
  file->excludes(etcd);
  if (stages == StageFlags::kTaken) {
    cmd->add_option("--stage-parts", flags.stage_parts,
                    "part of each pipeline stage's objects, e.g. 0,1,2,3 (default: stage mod parts)");
  }
  AddClientSecurityFlags(cmd, flags.security);
  cmd->add_option_function<std::string>(
         "--transport", [&flags](const std::string& t) { flags.ucx.enabled = t == "ucx"; },
         "tcp, or ucx: one-sided over UCX (RDMA where it finds it) between clients and stores on other hosts; "
         "a store serves it besides tcp, a client uses it with the stores that serve it (default tcp)")
      ->check(CLI::IsMember({"tcp", "ucx"}));
  cmd->add_option("--ucx-tls", flags.ucx.transports,
                  "with --transport ucx: UCX_TLS, e.g. rc,sm or tcp (default: the environment's, else UCX's choice)");
  cmd->add_option("--ucx-devices", flags.ucx.devices,
                  "with --transport ucx: UCX_NET_DEVICES, e.g. mlx5_0:1 or eth1 (default: the environment's, else all)");
}

Result<transfer::UcxSettings> TransportSettings(const PoolFlags& flags) {
  if (flags.ucx.enabled && !transfer::UcxBuilt()) {
    return InvalidArgument("--transport ucx: this kvpool was built without UCX (install libucx-dev and build "
                           "with -DKVPOOL_UCX=ON)");
  }
  if (!flags.ucx.enabled && (!flags.ucx.transports.empty() || !flags.ucx.devices.empty())) {
    return InvalidArgument("--ucx-tls and --ucx-devices need --transport ucx");
  }
  return flags.ucx;
}

Result<NamedPool> ResolvePool(const PoolFlags& flags) {
  const bool env = flags.environment == PoolEnvironment::kRead;
  NamedPool named;
  Result<client::PoolParts> parts = InvalidArgument("no pool");
  if (!flags.master.empty()) {
    named.source = "--master";
    parts = client::ParsePoolSpec(flags.master);
  } else if (!flags.pool.empty()) {
    named.source = "--pool";
    parts = client::ParsePoolSpec(flags.pool);
  } else if (!flags.pool_file.empty()) {
    named.source = "--pool-file";
    parts = client::ReadPoolFile(flags.pool_file);
  } else if (!flags.etcd.empty()) {
    named.source = "--etcd";
    parts = client::PoolParts::Elected(flags.etcd, flags.parts ? flags.parts : 1);
    if (Status s = parts->Validate(); !s.ok()) parts = s;
  } else if (const std::string value = Env("KVPOOL_POOL"); env && !value.empty()) {
    named.source = "KVPOOL_POOL";
    parts = client::ParsePoolSpec(value);
  } else if (const std::string value = Env("KVPOOL_MASTER"); env && !value.empty()) {
    named.source = "KVPOOL_MASTER";
    parts = client::ParsePoolSpec(value);
  } else if (const std::string value = Env("KVPOOL_ETCD"); env && !value.empty()) {
    named.source = "KVPOOL_ETCD";
    parts = client::PoolParts::Elected(value, flags.parts ? flags.parts : 1);
    if (Status s = parts->Validate(); !s.ok()) parts = s;
  } else {
    return named;
  }
  if (!parts.ok()) return Status(parts.status().code(), named.source + ": " + parts.status().message());
  if (!flags.stage_parts.empty()) {
    auto stages = client::ParseStageParts(flags.stage_parts);
    if (!stages.ok()) return InvalidArgument("--stage-parts: " + stages.status().message());
    parts->stage_parts = *std::move(stages);
    KVPOOL_RETURN_IF_ERROR(parts->Validate());
  }
  named.parts = *std::move(parts);
  return named;
}

std::vector<std::string> UnreadPoolVariables(const PoolFlags& flags) {
  std::vector<std::string> unread;
  if (flags.environment == PoolEnvironment::kRead) return unread;
  for (const char* name : {"KVPOOL_POOL", "KVPOOL_MASTER", "KVPOOL_ETCD"}) {
    if (!Env(name).empty()) unread.push_back(name);
  }
  return unread;
}

Result<client::PoolParts> ResolvePoolOrLocal(const PoolFlags& flags) {
  auto pool = ResolvePool(flags);
  if (!pool.ok()) return pool.status();
  return pool->parts ? *pool->parts : client::PoolParts::Single("127.0.0.1:50051");
}

}  // namespace kvpool::cli
