// SharedSecret: the pool's shared secret (`--auth-file FILE` on every kvpool process), and the
// proofs of holding it that peers exchange when a connection is set up.
//
// The secret itself never crosses the wire. A server sends a fresh random challenge; the
// client answers with HMAC-SHA256(secret, purpose ‖ challenge), which the server checks in
// constant time. `purpose` names the port ("transfer", "shm", "handoff", "grpc"), so a proof
// made for one cannot be replayed on another, and a fresh challenge per connection means a
// recorded proof cannot be replayed at all. What flows after set-up is not encrypted: the
// master's gRPC can use TLS (--tls-*); the data path relies on the network it runs on.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvpool {

class SharedSecret {
 public:
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kChallengeBytes = 16;
  static constexpr size_t kProofBytes = 32;
  using Challenge = std::array<uint8_t, kChallengeBytes>;
  using Proof = std::array<uint8_t, kProofBytes>;

  // Reads the secret from `path`: the file's bytes less trailing whitespace (a newline), at
  // least kMinBytes of them. A file that others than its owner may read or write is refused
  // (chmod 600), as is an empty or short one; the message says which and how to fix it.
  static Result<SharedSecret> Load(const std::string& path);
  // REQUIRES: secret.size() >= kMinBytes (tests and callers that generated it).
  static SharedSecret FromBytes(std::string secret);

  // A fresh random challenge (getrandom).
  static Challenge NewChallenge();
  Proof Prove(std::string_view purpose, const Challenge& challenge) const;
  // Constant time in the proof's bytes.
  bool Check(std::string_view purpose, const Challenge& challenge, const Proof& proof) const;

 private:
  explicit SharedSecret(std::string secret) : secret_(std::move(secret)) {}
  std::string secret_;
};

// True when `a` and `b` hold the same bytes, in time that depends on their length only (for
// comparing proofs: no early exit tells an attacker how many leading bytes were right).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The secret of a process started with `--auth-file PATH`, or none for "" (no
// authentication): the one place command lines turn the flag into a secret.
Result<std::optional<SharedSecret>> LoadAuthFile(const std::string& path);

}  // namespace kvpool
