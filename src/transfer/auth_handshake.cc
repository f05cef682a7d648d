#include "transfer/auth_handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transfer/socket_util.h"
#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {

void PutPrefix(uint8_t* out, uint32_t magic, uint16_t claim_length = 0) {
  PutField<uint32_t>(out, 0, magic);
  out[4] = kAuthVersion;
  out[5] = 0;
  PutField<uint16_t>(out, 6, claim_length);
}

bool HasPrefix(const uint8_t* in, uint32_t magic) {
  return GetField<uint32_t>(in, 0) == magic && in[4] == kAuthVersion && in[5] == 0;
}

}  // namespace

void EncodeChallenge(const SharedSecret::Challenge& challenge, uint8_t out[kChallengeSize]) {
  PutPrefix(out, kChallengeMagic);
  std::memcpy(out + 8, challenge.data(), challenge.size());
}

Status DecodeChallenge(const uint8_t in[kChallengeSize], SharedSecret::Challenge* challenge) {
  if (!HasPrefix(in, kChallengeMagic) || GetField<uint16_t>(in, 6) != 0) {
    return InvalidArgument("not an authentication challenge");
  }
  std::memcpy(challenge->data(), in + 8, challenge->size());
  return Status::Ok();
}

bool StartsLikeChallenge(const uint8_t* in) { return GetField<uint32_t>(in, 0) == kChallengeMagic; }

std::vector<uint8_t> EncodeProof(const SharedSecret& key, std::string_view purpose,
                                 const SharedSecret::Challenge& challenge) {
  const std::string claim = key.claim();  // at most TenantClaim::kMaxText bytes (TenantClaim::Parse)
  std::vector<uint8_t> out(kProofSize + claim.size());
  PutPrefix(out.data(), kProofMagic, static_cast<uint16_t>(claim.size()));
  const SharedSecret::Proof proof = key.Prove(purpose, challenge);
  std::memcpy(out.data() + 8, proof.data(), proof.size());
  std::memcpy(out.data() + kProofSize, claim.data(), claim.size());
  return out;
}

Result<size_t> ProofSize(const uint8_t in[kProofSize]) {
  if (!HasPrefix(in, kProofMagic)) return InvalidArgument("not a proof of the pool's secret");
  const size_t claim = GetField<uint16_t>(in, 6);
  if (claim > TenantClaim::kMaxText) return InvalidArgument(fmt::format("a proof claims {} bytes of claim", claim));
  return kProofSize + claim;
}

Result<std::optional<TenantClaim>> CheckProof(const SharedSecret& pool, std::string_view purpose,
                                              const SharedSecret::Challenge& challenge, std::span<const uint8_t> in) {
  const auto refused = [](std::string_view why) { return Unauthenticated(std::string(why)); };
  if (in.size() < kProofSize) return refused("a short proof");
  auto size = ProofSize(in.data());
  if (!size.ok() || *size != in.size()) return refused("not a proof of the pool's secret");
  const std::string_view claim(reinterpret_cast<const char*>(in.data()) + kProofSize, in.size() - kProofSize);
  auto key = pool.KeyFor(claim);
  if (!key.ok()) return refused(fmt::format("a proof with a bad tenant claim: {}", key.status().message()));
  SharedSecret::Proof proof;
  std::memcpy(proof.data(), in.data() + 8, proof.size());
  if (!key->Check(purpose, challenge, proof)) {
    return refused(claim.empty() ? "it did not prove it holds the pool's secret"
                                 : fmt::format("its proof does not match tenant claim '{}'", claim));
  }
  return key->tenant();
}

Status ProveSecret(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline) {
  uint8_t in[kChallengeSize];
  if (!ReadExactly(fd, in, sizeof(in), deadline)) {
    return Unauthenticated(fmt::format("{} did not ask for the pool's secret (is it running without --auth-file?)", peer));
  }
  SharedSecret::Challenge challenge;
  if (!DecodeChallenge(in, &challenge).ok()) {
    return Unauthenticated(fmt::format("{} answered with something other than an authentication challenge", peer));
  }
  const std::vector<uint8_t> out = EncodeProof(secret, purpose, challenge);
  if (!WriteExactly(fd, out.data(), out.size(), deadline)) {
    return Unavailable(fmt::format("{} went away during authentication", peer));
  }
  return Status::Ok();
}

Status DemandProof(int fd, const SharedSecret& secret, std::string_view purpose, std::string_view peer,
                   std::chrono::steady_clock::time_point deadline) {
  const SharedSecret::Challenge challenge = SharedSecret::NewChallenge();
  uint8_t out[kChallengeSize];
  EncodeChallenge(challenge, out);
  if (!WriteExactly(fd, out, sizeof(out), deadline)) {
    return Unavailable(fmt::format("{} went away during authentication", peer));
  }
  std::vector<uint8_t> in(kProofSize);
  if (!ReadExactly(fd, in.data(), kProofSize, deadline)) {
    return Unauthenticated(fmt::format("{} did not prove it holds the pool's secret", peer));
  }
  auto size = ProofSize(in.data());
  if (!size.ok()) return Unauthenticated(fmt::format("{} did not prove it holds the pool's secret", peer));
  in.resize(*size);
  if (!ReadExactly(fd, in.data() + kProofSize, *size - kProofSize, deadline)) {
    return Unauthenticated(fmt::format("{} sent half a proof", peer));
  }
  auto tenant = CheckProof(secret, purpose, challenge, in);
  if (!tenant.ok()) return Unauthenticated(fmt::format("{}: {}", peer, tenant.status().message()));
  if (*tenant) {
    return Unauthenticated(fmt::format("{} proved tenant '{}''s credential; this socket serves the pool's secret only "
                                       "(tenants read over tcp, inside the master's grants)",
                                       peer, (*tenant)->name));
  }
  return Status::Ok();
}

}  // namespace kvpool::transfer
