// The pool flags every client-side subcommand shares (put/get/stat, bench, replay, store):
//   --master HOST:PORT       a one-part pool (env KVPOOL_MASTER)
//   --pool part0=H:P,...     the parts, inline (env KVPOOL_POOL)
//   --pool-file FILE         the parts, from a file (client/pool_parts.h has the format)
//   --etcd HOST:PORT,...     the parts' masters are elected in etcd (env KVPOOL_ETCD);
//   --parts N                  how many parts (default 1)
//   --stage-parts 0,1,...    which part holds each pipeline stage (default: stage mod N)
// At most one of --master / --pool / --pool-file / --etcd; flags win over the environment.
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

#include "cli/security_flags.h"
#include "client/pool_parts.h"
#include "common/status.h"
#include "transfer/transfer_engine.h"

namespace kvpool::cli {

struct PoolFlags {
  std::string master, pool, pool_file, stage_parts, etcd;
  uint32_t parts = 0;  // with --etcd; 0 = not given
  SecurityFlags security;
  transfer::UcxSettings ucx;
};

// `master_help` describes --master for this subcommand.
void AddPoolFlags(CLI::App* cmd, PoolFlags& flags, const std::string& master_help);

// The pool the flags (or else the environment) name; nullopt when they name none.
// INVALID_ARGUMENT/NOT_FOUND for a malformed list, an unreadable file, or two of the flags.
Result<std::optional<client::PoolParts>> ResolvePool(const PoolFlags& flags);
// The UCX settings the flags ask for; INVALID_ARGUMENT when they ask for UCX in a build
// without it.
Result<transfer::UcxSettings> TransportSettings(const PoolFlags& flags);

// The same, with 127.0.0.1:50051 (`kvpool serve`'s default) when nothing names a pool.
Result<client::PoolParts> ResolvePoolOrLocal(const PoolFlags& flags);

}  // namespace kvpool::cli
