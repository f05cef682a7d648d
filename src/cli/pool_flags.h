// The pool flags every client-side subcommand shares (put/get/stat, bench, replay, store):
//   --master HOST:PORT       a one-part pool (env KVPOOL_MASTER)
//   --pool part0=H:P,...     the parts, inline (env KVPOOL_POOL)
//   --pool-file FILE         the parts, from a file (client/pool_parts.h has the format)
//   --etcd HOST:PORT,...     the parts' masters are elected in etcd (env KVPOOL_ETCD);
//   --parts N                  how many parts (default 1)
//   --stage-parts 0,1,...    which part holds each pipeline stage (default: stage mod N);
//                            not a store's (a store serves one part and routes no keys)
// At most one of --master / --pool / --pool-file / --etcd; flags win over the environment.
//
// Who reads the environment (KVPOOL_POOL, then KVPOOL_MASTER, then KVPOOL_ETCD): the clients
// of a running pool (put, get, exists, rm, stat, top, bench) and a store (the part it joins).
// A replay does not: it starts its own embedded pool unless its command line names one, so a
// variable left in the shell by an earlier step cannot change which pool a result came from;
// its first line says which pool it uses and which variables it did not read.
//
// And the credentials to bring (security_flags.h): --auth-file, --tls-ca.
// And how to reach stores on other hosts (transfer/transfer_engine.h, UcxSettings):
//   --transport tcp|ucx      ucx: one-sided over UCX (RDMA where it finds it) to stores that
//                            serve it (a store given --transport ucx), tcp to the rest
//   --ucx-tls LIST           UCX_TLS for it (default: the environment's, else UCX's choice)
//   --ucx-devices LIST       UCX_NET_DEVICES for it
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/security_flags.h"
#include "client/pool_parts.h"
#include "common/status.h"
#include "transfer/transfer_engine.h"

namespace kvpool::cli {

// The roles that read KVPOOL_POOL/KVPOOL_MASTER/KVPOOL_ETCD and those that do not (above).
enum class PoolEnvironment { kRead, kIgnore };
// Which flags a role takes: a store joins one part, so it routes no stages.
enum class StageFlags { kTaken, kNotTaken };

struct PoolFlags {
  std::string master, pool, pool_file, stage_parts, etcd;
  uint32_t parts = 0;  // with --etcd; 0 = not given
  PoolEnvironment environment = PoolEnvironment::kRead;
  SecurityFlags security;
  transfer::UcxSettings ucx;
};

// `master_help` describes --master for this subcommand.
void AddPoolFlags(CLI::App* cmd, PoolFlags& flags, const std::string& master_help,
                  PoolEnvironment environment = PoolEnvironment::kRead, StageFlags stages = StageFlags::kTaken);

// The pool the flags (or else, where the role reads it, the environment) name.
struct NamedPool {
  std::optional<client::PoolParts> parts;  // nullopt: nothing names a pool
  std::string source;                      // "--master", "KVPOOL_POOL", ...; "" with no pool
  // A lone master names one part's master itself (a store's --part K joins it), where a
  // list names every part.
  bool lone_master() const { return source == "--master" || source == "KVPOOL_MASTER"; }
};
// INVALID_ARGUMENT/NOT_FOUND for a malformed list, an unreadable file, or two of the flags;
// the message names the flag or variable it came from.
Result<NamedPool> ResolvePool(const PoolFlags& flags);
// The KVPOOL_* variables that are set, for a role that does not read them to say so.
std::vector<std::string> UnreadPoolVariables(const PoolFlags& flags);
// The UCX settings the flags ask for; INVALID_ARGUMENT when they ask for UCX in a build
// without it.
Result<transfer::UcxSettings> TransportSettings(const PoolFlags& flags);

// The same, with 127.0.0.1:50051 (`kvpool serve`'s default) when nothing names a pool.
Result<client::PoolParts> ResolvePoolOrLocal(const PoolFlags& flags);

}  // namespace kvpool::cli
