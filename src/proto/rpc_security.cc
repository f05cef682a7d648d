#include "proto/rpc_security.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace kvpool::proto {
namespace {

constexpr std::string_view kGrpcPurpose = "master-grpc";

// Adds the token to every call's initial metadata.
class AddToken final : public grpc::experimental::Interceptor {
 public:
  AddToken(const std::string* token, const std::string* claim) : token_(token), claim_(claim) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthMetadataKey, *token_);
      if (!claim_->empty()) methods->GetSendInitialMetadata()->emplace(kTenantMetadataKey, *claim_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const token_;  // the factory's, which outlives every call of its channel
  const std::string* const claim_;
};

class AddTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AddTokenFactory(const SharedSecret& key) : token_(RpcToken(key)), claim_(key.claim()) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new AddToken(&token_, &claim_);
  }

 private:
  const std::string token_;
  const std::string claim_;  // "" for the pool's secret
};

std::string_view Metadata(const grpc::ServerContext* context, const char* key) {
  const auto& metadata = context->client_metadata();
  const auto found = metadata.find(key);
  return found == metadata.end() ? std::string_view() : std::string_view(found->second.data(), found->second.size());
}

}  // namespace

std::string RpcToken(const SharedSecret& key) {
  const SharedSecret::Proof proof = key.Prove(kGrpcPurpose, SharedSecret::Challenge{});
  std::string hex;
  for (uint8_t b : proof) hex += fmt::format("{:02x}", b);
  return hex;
}

std::shared_ptr<grpc::Channel> SecureChannel(const std::string& address, const grpc::ChannelArguments& args,
                                             const RpcCredentials& credentials) {
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials = grpc::InsecureChannelCredentials();
  if (!credentials.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = credentials.tls_ca_pem;
    channel_credentials = grpc::SslCredentials(ssl);
  }
  if (!credentials.secret) return grpc::CreateCustomChannel(address, channel_credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<AddTokenFactory>(*credentials.secret));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, channel_credentials, args,
                                                                 std::move(interceptors));
}

Result<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(const RpcServerSecurity& security) {
  if (security.tls_cert_pem.empty() != security.tls_key_pem.empty()) {
    return InvalidArgument("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)");
  }
  if (security.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
  return grpc::SslServerCredentials(ssl);
}

Result<std::optional<TenantClaim>> CallerOf(const grpc::ServerContext* context, const std::optional<SharedSecret>& pool,
                                            const std::string& pool_token) {
  if (!pool) return std::optional<TenantClaim>();
  const std::string_view token = context != nullptr ? Metadata(context, kAuthMetadataKey) : std::string_view();
  if (token.empty()) return Unauthenticated("asks for the pool's secret: give this process the pool's --auth-file");
  const std::string_view claim = Metadata(context, kTenantMetadataKey);
  if (claim.empty()) {
    if (ConstantTimeEqual(token, pool_token)) return std::optional<TenantClaim>();
    return Unauthenticated("refused the call: the caller holds another secret than the pool's");
  }
  auto key = pool->KeyFor(claim);
  if (!key.ok()) return Unauthenticated(fmt::format("refused a malformed tenant claim: {}", key.status().message()));
  if (!ConstantTimeEqual(token, RpcToken(*key))) {
    return Unauthenticated(fmt::format("refused tenant claim '{}': its credential was not issued with the pool's secret",
                                       claim));
  }
  return key->tenant();
}

Result<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("{} {}: cannot read the file", flag, path));
  std::stringstream pem;
  pem << in.rdbuf();
  if (pem.str().find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(fmt::format("{} {}: not a PEM file (no -----BEGIN line)", flag, path));
  }
  return pem.str();
}

}  // namespace kvpool::proto
