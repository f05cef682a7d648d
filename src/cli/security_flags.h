// The security flags of every kvpool process (common/shared_secret.h, proto/rpc_security.h):
//   --auth-file FILE   the pool's shared secret, mode 600 (env KVPOOL_AUTH_FILE); every process
//                      of one pool is given the same file. A client may be given a tenant's
//                      credential instead (`kvpool credential issue`): it then reaches only its
//                      namespaces. Masters and stores need the pool's own secret.
//   --tls-ca FILE      clients and stores: the masters speak TLS; trust certificates of this CA
//                      (env KVPOOL_TLS_CA)
//   --tls-cert FILE, --tls-key FILE   a master: speak TLS with this certificate and key
// Files are read once, at start-up; a missing, unreadable or too-open file is an error then.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "common/status.h"
#include "proto/rpc_credentials.h"

namespace kvpool::cli {

struct SecurityFlags {
  std::string auth_file, tls_ca, tls_cert, tls_key;
};

void AddAuthFileFlag(CLI::App* cmd, SecurityFlags& flags);
// --auth-file and --tls-ca: what a client or store brings.
void AddClientSecurityFlags(CLI::App* cmd, SecurityFlags& flags);
// --auth-file, --tls-cert and --tls-key: what a master asks for.
void AddServerSecurityFlags(CLI::App* cmd, SecurityFlags& flags);

Result<proto::RpcCredentials> ClientCredentials(const SecurityFlags& flags);
Result<proto::RpcServerSecurity> ServerSecurity(const SecurityFlags& flags);
// --auth-file for a master or a store: the pool's own secret or none; a tenant's credential
// is INVALID_ARGUMENT, saying so.
Result<std::optional<SharedSecret>> LoadPoolSecret(const std::string& path);

}  // namespace kvpool::cli
