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
  explicit AddToken(std::string token) : token_(std::move(token)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthMetadataKey, token_);
    }
    methods->Proceed();
  }

 private:
  const std::string token_;
};

class AddTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AddTokenFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new AddToken(token_);
  }

 private:
  const std::string token_;
};

}  // namespace

std::string RpcToken(const SharedSecret& secret) {
  const SharedSecret::Proof proof = secret.Prove(kGrpcPurpose, SharedSecret::Challenge{});
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
  interceptors.push_back(std::make_unique<AddTokenFactory>(RpcToken(*credentials.secret)));
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

bool CallCarriesToken(const grpc::ServerContext* context, const std::string& token) {
  if (token.empty()) return true;
  if (context == nullptr) return false;
  const auto& metadata = context->client_metadata();
  const auto found = metadata.find(kAuthMetadataKey);
  return found != metadata.end() && ConstantTimeEqual(std::string_view(found->second.data(), found->second.size()), token);
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
