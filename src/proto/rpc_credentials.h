// What a store or client brings to a master, and what a master asks for (rpc_security.h says
// how they are used). Plain structs, without gRPC's headers, for the options that carry them.
#pragma once

#include <optional>
#include <string>

#include "common/shared_secret.h"

namespace kvpool::proto {

// What a store or client brings to a master.
struct RpcCredentials {
  std::optional<SharedSecret> secret;  // none: calls carry no proof
  std::string tls_ca_pem;              // "": plaintext; else TLS, the master's certificate checked against it
};

// What a master asks for.
struct RpcServerSecurity {
  std::optional<SharedSecret> secret;  // none: any caller is answered
  std::string tls_cert_pem, tls_key_pem;  // both "": plaintext; both set: TLS
};

}  // namespace kvpool::proto
