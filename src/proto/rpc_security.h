// Who may call a master, and over what: the pool's secret on every gRPC call, and TLS as an
// option (gRPC's own SSL credentials).
//
// A caller holding the pool's secret (common/shared_secret.h) sends metadata "kvpool-auth" =
// hex(HMAC-SHA256(secret, "master-grpc" ‖ 0 ‖ 16 zero bytes)) with every call; a master
// started with the secret answers calls without it UNAUTHENTICATED. gRPC has no set-up
// exchange to hang a fresh challenge on, so this proof is a bearer token: it never reveals the
// secret, but a listener on a plaintext link could replay it — use TLS where links are shared.
//
// A tenant (common/tenant_claim.h) sends its claim as metadata "kvpool-tenant" and the token
// made with its own key; the master derives that key from the pool's secret and the claim.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/shared_secret.h"
#include "common/status.h"
#include "proto/rpc_credentials.h"

namespace kvpool::proto {

inline constexpr char kAuthMetadataKey[] = "kvpool-auth";
inline constexpr char kTenantMetadataKey[] = "kvpool-tenant";

// The token a caller holding `key` (the pool's secret or a tenant's) sends (hex, 64 characters).
std::string RpcToken(const SharedSecret& key);

// A channel to `address` with `args` that carries `credentials`.
std::shared_ptr<grpc::Channel> SecureChannel(const std::string& address, const grpc::ChannelArguments& args,
                                             const RpcCredentials& credentials);

// The listening credentials for `security`. INVALID_ARGUMENT for a certificate without a key
// or the other way round.
Result<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const RpcServerSecurity& security);

// Who made the call, for a master holding the pool's secret `pool` (whose token is
// `pool_token`, RpcToken(pool), kept by the caller): none (the pool's secret, every namespace)
// or the tenant whose claim and token it carries; UNAUTHENTICATED, saying why, otherwise. A
// master without a secret answers anyone as the pool. A null context (handlers called directly
// by tests and the fuzzer) carries nothing.
Result<std::optional<TenantClaim>> CallerOf(const grpc::ServerContext* context, const std::optional<SharedSecret>& pool,
                                            const std::string& pool_token);

// The contents of a PEM file named on a command line; "" for "" (not given). NOT_FOUND /
// INVALID_ARGUMENT for a file that cannot be read or holds no PEM block.
Result<std::string> ReadPemFile(const std::string& path, const std::string& flag);

}  // namespace kvpool::proto
