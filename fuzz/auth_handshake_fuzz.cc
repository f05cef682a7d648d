// The proof of the pool's secret when a transfer connection is set up (transfer/auth_handshake.h):
// the challenge a client reads first from a store, and the proof a store reads first from a client.
// Input: the bytes a peer sent, the first 24 taken as a challenge (a short input is padded with
// zeros) and the rest as a proof (40 bytes, then a tenant's claim, common/tenant_claim.h).
// Checked: a challenge that decodes re-encodes to the same bytes; a proof is accepted, for
// either socket's purpose, exactly when it is byte for byte the one the key of the claim it
// carries (the pool's secret for none) makes for that challenge and purpose, and the tenant
// it is accepted for is that claim's.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

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
  uint8_t challenge_bytes[kChallengeSize] = {};
  std::memcpy(challenge_bytes, data, std::min(size, kChallengeSize));
  const std::span<const uint8_t> proof(data + std::min(size, kChallengeSize), size - std::min(size, kChallengeSize));

  SharedSecret::Challenge challenge{};
  const bool decoded = DecodeChallenge(challenge_bytes, &challenge).ok();
  if (decoded) {
    uint8_t again[kChallengeSize];
    EncodeChallenge(challenge, again);
    Require(std::memcmp(again, challenge_bytes, kChallengeSize) == 0);
    Require(StartsLikeChallenge(challenge_bytes));
  }
  const std::string_view claim =
      proof.size() >= kProofSize
          ? std::string_view(reinterpret_cast<const char*>(proof.data()) + kProofSize, proof.size() - kProofSize)
          : std::string_view();
  const Result<SharedSecret> key = secret.KeyFor(claim);
  for (std::string_view purpose : {kTcpPurpose, kShmPurpose}) {
    const auto accepted = CheckProof(secret, purpose, challenge, proof);
    const bool exact = proof.size() >= kProofSize && key.ok() &&
                       EncodeProof(*key, purpose, challenge) == std::vector<uint8_t>(proof.begin(), proof.end());
    Require(accepted.ok() == exact);
    if (accepted.ok()) Require((*accepted ? (*accepted)->ToString() : std::string()) == claim);
  }
  return 0;
}
