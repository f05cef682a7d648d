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
//   proof,     client -> server, 40 bytes: magic "KVPA" u32 | version u8 = 1 | 3 bytes 0 |
//                                          HMAC-SHA256(secret, purpose ‖ 0 ‖ challenge)
//
// The purpose names the socket ("transfer-tcp", "transfer-shm"), so a proof is good for one
// kind of connection only. A client holding a secret accepts no server that does not ask for
// it (it would be writing the pool's bytes to a server nobody vouched for); a client without
// one that meets a challenge fails with UNAUTHENTICATED, saying so.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

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

void EncodeProof(const SharedSecret& secret, std::string_view purpose, const SharedSecret::Challenge& challenge,
                 uint8_t out[kProofSize]);
bool CheckProof(const SharedSecret& secret, std::string_view purpose, const SharedSecret::Challenge& challenge,
                const uint8_t in[kProofSize]);

// The client's side on a blocking socket (shm): reads the challenge and sends the proof, by
// `deadline`. UNAUTHENTICATED when the server sent something else or nothing in time.
Status ProveSecret(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline);
// The server's side on a blocking socket: sends a challenge and checks the proof.
// UNAUTHENTICATED for a wrong or missing proof.
Status DemandProof(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline);

}  // namespace kvpool::transfer
