#include "cli/security_flags.h"

#include <fmt/format.h>

#include "proto/rpc_security.h"

namespace kvpool::cli {

void AddAuthFileFlag(CLI::App* cmd, SecurityFlags& flags) {
  cmd->add_option("--auth-file", flags.auth_file,
                  "the pool's shared secret (a file of >= 16 bytes, chmod 600); every process of the pool gets "
                  "the same one, or a client a tenant's credential (`kvpool credential issue`) (env KVPOOL_AUTH_FILE)")
      ->envname("KVPOOL_AUTH_FILE");
}

void AddClientSecurityFlags(CLI::App* cmd, SecurityFlags& flags) {
  AddAuthFileFlag(cmd, flags);
  cmd->add_option("--tls-ca", flags.tls_ca, "the masters speak TLS: trust certificates of this CA (PEM; env KVPOOL_TLS_CA)")
      ->envname("KVPOOL_TLS_CA");
}

void AddServerSecurityFlags(CLI::App* cmd, SecurityFlags& flags) {
  AddAuthFileFlag(cmd, flags);
  auto* cert = cmd->add_option("--tls-cert", flags.tls_cert, "speak TLS on the gRPC port with this certificate (PEM)");
  auto* key = cmd->add_option("--tls-key", flags.tls_key, "the private key of --tls-cert (PEM)");
  cert->needs(key);
  key->needs(cert);
}

Result<proto::RpcCredentials> ClientCredentials(const SecurityFlags& flags) {
  proto::RpcCredentials credentials;
  auto secret = LoadAuthFile(flags.auth_file);
  if (!secret.ok()) return secret.status();
  credentials.secret = *std::move(secret);
  auto ca = proto::ReadPemFile(flags.tls_ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  credentials.tls_ca_pem = *std::move(ca);
  return credentials;
}

Result<std::optional<SharedSecret>> LoadPoolSecret(const std::string& path) {
  auto secret = LoadAuthFile(path);
  if (secret.ok() && *secret && (*secret)->tenant()) {
    return InvalidArgument(fmt::format("--auth-file {} is tenant '{}''s credential; masters and stores need the pool's "
                                       "own secret",
                                       path, (*secret)->tenant()->name));
  }
  return secret;
}

Result<proto::RpcServerSecurity> ServerSecurity(const SecurityFlags& flags) {
  proto::RpcServerSecurity security;
  auto secret = LoadPoolSecret(flags.auth_file);
  if (!secret.ok()) return secret.status();
  security.secret = *std::move(secret);
  auto cert = proto::ReadPemFile(flags.tls_cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = proto::ReadPemFile(flags.tls_key, "--tls-key");
  if (!key.ok()) return key.status();
  security.tls_cert_pem = *std::move(cert);
  security.tls_key_pem = *std::move(key);
  return security;
}

}  // namespace kvpool::cli
