// The proof of the pool's secret (common/shared_secret.h) when a transfer connection is set up:
// a server started with a secret speaks first, with a challenge; the client answers with its
// proof before anything else; the server answers with its verdict and closes a connection
// whose proof is wrong. A server without a secret sends nothing and the protocol is as before.
// On tcp the verdict is a response header (tcp_frame.h) to request id 0, which no request
// has: status OK, or UNAUTHENTICATED before the close; the client sends its first frame only
// after an OK. On shm it is the reply to the request that follows the proof.
//
//   challenge, server -> client, 24 bytes: magic "KVPC" u32 | version u8 = 1 | 3 bytes 0 |
//                                          challenge (16 random bytes)
//   proof,     client -> server, 40 bytes + claim: magic "KVPA" u32 | version u8 = 1 | 0 u8 |
//                                          claim length u16 |
//                                          HMAC-SHA256(key, purpose ‖ 0 ‖ challenge) | claim
//
// The key is the pool's secret (no claim) or a tenant's key with its claim (SharedSecret,
// common/tenant_claim.h); a server holding the pool's secret derives the tenant's key from
// the claim. Only tcp serves tenants (inside the master's grants): shm and the handoff refuse
// them, since what they hand out (a mapped segment) holds every namespace's bytes.
//
// The purpose names the socket ("transfer-tcp", "transfer-shm"), so a proof is good for one
// kind of connection only. A client holding a secret accepts no server that does not ask for
// it (it would be writing the pool's bytes to a server nobody vouched for); a client without
// one that meets a challenge fails with UNAUTHENTICATED, saying so.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/shared_secret.h"
#include "common/status.h"

namespace kvpool::transfer {

inline constexpr uint32_t kChallengeMagic = 0x4350564B;  // "KVPC" on the wire
inline constexpr uint32_t kProofMagic = 0x4150564B;      // "KVPA"
inline constexpr uint8_t kAuthVersion = 1;
inline constexpr size_t kChallengeSize = 24;
inline constexpr size_t kProofSize = 40;
inline constexpr std::string_view kTcpPurpose = "transfer-tcp";
inline constexpr std::string_view kShmPurpose = "transfer-shm";

void EncodeChallenge(const SharedSecret::Challenge& challenge, uint8_t out[kChallengeSize]);
// INVALID_ARGUMENT for bytes that are not a challenge.
Status DecodeChallenge(const uint8_t in[kChallengeSize], SharedSecret::Challenge* challenge);
// True when `in` (at least 4 bytes) starts like a challenge: a peer without the secret uses it
// to say why the server's first bytes are not what it expected.
bool StartsLikeChallenge(const uint8_t* in);

// The proof made with `key` (the pool's secret or a tenant's), its claim appended.
std::vector<uint8_t> EncodeProof(const SharedSecret& key, std::string_view purpose,
                                 const SharedSecret::Challenge& challenge);
// The whole proof's size, from its first kProofSize bytes; INVALID_ARGUMENT when they are not
// a proof's or claim more than TenantClaim::kMaxText bytes.
Result<size_t> ProofSize(const uint8_t in[kProofSize]);
// Checks a whole proof against the pool's secret `pool`: the tenant it proved (none for the
// pool's own secret), or UNAUTHENTICATED.
Result<std::optional<TenantClaim>> CheckProof(const SharedSecret& pool, std::string_view purpose,
                                              const SharedSecret::Challenge& challenge, std::span<const uint8_t> proof);

// The client's side on a blocking socket (shm): reads the challenge and sends the proof, by
// `deadline`. UNAUTHENTICATED when the server sent something else or nothing in time.
Status ProveSecret(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline);
// The server's side on a blocking socket: sends a challenge and checks the proof.
// UNAUTHENTICATED for a wrong or missing proof, and for a tenant's (these sockets serve the
// pool's secret only).
Status DemandProof(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline);

}  // namespace kvpool::transfer
