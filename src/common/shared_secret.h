// SharedSecret: the pool's shared secret (`--auth-file FILE` on every kvpool process), and the
// proofs of holding it that peers exchange when a connection is set up.
//
// The secret itself never crosses the wire. A server sends a fresh random challenge; the
// client answers with HMAC-SHA256(secret, purpose ‖ challenge), which the server checks in
// constant time. `purpose` names the port ("transfer", "shm", "handoff", "grpc"), so a proof
// made for one cannot be replayed on another, and a fresh challenge per connection means a
// recorded proof cannot be replayed at all. What flows after set-up is not encrypted: the
// master's gRPC can use TLS (--tls-*); the data path relies on the network it runs on.
//
// A secret is either the pool's own (masters, stores, the operator's tools: every namespace)
// or a tenant's key (common/tenant_claim.h): HMAC-SHA256(pool secret, "kvpool-tenant" ‖ 0 ‖
// claim), issued by `kvpool credential issue` into a file of one line
//   kvpool-tenant v1 NAME:NS1,NS2 HEXKEY
// which `--auth-file` takes like the pool's. A tenant's proofs carry its claim; a verifier
// with the pool's secret derives the key from the claim (KeyFor) and checks the proof with it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/tenant_claim.h"

namespace kvpool {

class SharedSecret {
 public:
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kChallengeBytes = 16;
  static constexpr size_t kProofBytes = 32;
  using Challenge = std::array<uint8_t, kChallengeBytes>;
  using Proof = std::array<uint8_t, kProofBytes>;

  // Reads the secret from `path`: the file's bytes less trailing whitespace (a newline), at
  // least kMinBytes of them, or a tenant's credential line. A file that others than its owner
  // may read or write is refused (chmod 600), as is an empty or short one or a malformed
  // credential; the message says which and how to fix it.
  static Result<SharedSecret> Load(const std::string& path);
  // REQUIRES: secret.size() >= kMinBytes (tests and callers that generated it).
  static SharedSecret FromBytes(std::string secret);

  // A fresh random challenge (getrandom).
  static Challenge NewChallenge();
  Proof Prove(std::string_view purpose, const Challenge& challenge) const;
  // Constant time in the proof's bytes.
  bool Check(std::string_view purpose, const Challenge& challenge, const Proof& proof) const;

  // The tenant this key belongs to; none for the pool's own secret.
  const std::optional<TenantClaim>& tenant() const { return tenant_; }
  // What proofs made with this key carry: the tenant's claim text, "" for the pool's secret.
  std::string claim() const { return tenant_ ? tenant_->ToString() : std::string(); }
  // REQUIRES: this is the pool's secret (no tenant). The key of `claim`'s tenant.
  SharedSecret ForTenant(TenantClaim claim) const;
  // The key a proof carrying `claim` must have been made with: this (the pool's secret) for
  // "", else the claim's tenant key. INVALID_ARGUMENT for a malformed claim; UNAUTHENTICATED
  // when this is itself a tenant's key (it vouches for no one).
  Result<SharedSecret> KeyFor(std::string_view claim) const;
  // REQUIRES: a tenant's key. The credential file's line (Load reads it back).
  std::string CredentialText() const;

 private:
  explicit SharedSecret(std::string secret, std::optional<TenantClaim> tenant = std::nullopt)
      : secret_(std::move(secret)), tenant_(std::move(tenant)) {}
  static Result<SharedSecret> ParseCredential(std::string_view text, const std::string& path);
  std::string secret_;
  std::optional<TenantClaim> tenant_;
};

// True when `a` and `b` hold the same bytes, in time that depends on their length only (for
// comparing proofs: no early exit tells an attacker how many leading bytes were right).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The secret of a process started with `--auth-file PATH`, or none for "" (no
// authentication): the one place command lines turn the flag into a secret.
Result<std::optional<SharedSecret>> LoadAuthFile(const std::string& path);

}  // namespace kvpool
