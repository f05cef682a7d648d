// The proof of the pool's secret when a transfer connection is set up (transfer/auth_handshake.h):
// the challenge a client reads first from a store, and the proof a store reads first from a client.
// Input: the bytes a peer sent, the first 24 taken as a challenge and the next 40 as a proof
// (a short input is padded with zeros).
// Checked: a challenge that decodes re-encodes to the same bytes; a proof is accepted, for
// either socket's purpose, exactly when it is byte for byte the one the secret makes for that
// challenge and purpose (and never for the other purpose).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transfer/auth_handshake.h"

using namespace kvpool;
using namespace kvpool::transfer;

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SharedSecret secret = SharedSecret::FromBytes("the fuzzer's secret, 32 bytes ..");
  uint8_t challenge_bytes[kChallengeSize] = {}, proof_bytes[kProofSize] = {};
  std::memcpy(challenge_bytes, data, std::min(size, kChallengeSize));
  if (size > kChallengeSize) std::memcpy(proof_bytes, data + kChallengeSize, std::min(size - kChallengeSize, kProofSize));

  SharedSecret::Challenge challenge{};
  const bool decoded = DecodeChallenge(challenge_bytes, &challenge).ok();
  if (decoded) {
    uint8_t again[kChallengeSize];
    EncodeChallenge(challenge, again);
    Require(std::memcmp(again, challenge_bytes, kChallengeSize) == 0);
    Require(StartsLikeChallenge(challenge_bytes));
  }
  for (std::string_view purpose : {kTcpPurpose, kShmPurpose}) {
    uint8_t expected[kProofSize];
    EncodeProof(secret, purpose, challenge, expected);
    const bool exact = std::memcmp(expected, proof_bytes, kProofSize) == 0;
    Require(CheckProof(secret, purpose, challenge, proof_bytes) == exact);
  }
  return 0;
}
