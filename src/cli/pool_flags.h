// The pool flags every client-side subcommand shares (put/get/stat, bench, replay, store):
//   --master HOST:PORT       a one-part pool (env KVPOOL_MASTER)
//   --pool part0=H:P,...     the parts, inline (env KVPOOL_POOL)
//   --pool-file FILE         the parts, from a file (client/pool_parts.h has the format)
//   --etcd HOST:PORT,...     the parts' masters are elected in etcd (env KVPOOL_ETCD);
//   --parts N                  how many parts (default 1)
//   --stage-parts 0,1,...    which part holds each pipeline stage (default: stage mod N)
// At most one of --master / --pool / --pool-file / --etcd; flags win over the environment.
// And the credentials to bring (security_flags.h): --auth-file, --tls-ca.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "cli/security_flags.h"
#include "client/pool_parts.h"
#include "common/status.h"

namespace kvpool::cli {

struct PoolFlags {
  std::string master, pool, pool_file, stage_parts, etcd;
  uint32_t parts = 0;  // with --etcd; 0 = not given
  SecurityFlags security;
};

// `master_help` describes --master for this subcommand.
void AddPoolFlags(CLI::App* cmd, PoolFlags& flags, const std::string& master_help);

// The pool the flags (or else the environment) name; nullopt when they name none.
// INVALID_ARGUMENT/NOT_FOUND for a malformed list, an unreadable file, or two of the flags.
Result<std::optional<client::PoolParts>> ResolvePool(const PoolFlags& flags);
// The same, with 127.0.0.1:50051 (`kvpool serve`'s default) when nothing names a pool.
Result<client::PoolParts> ResolvePoolOrLocal(const PoolFlags& flags);

}  // namespace kvpool::cli
