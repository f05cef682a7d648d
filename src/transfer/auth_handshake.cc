#include "transfer/auth_handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transfer/wire_bytes.h"

namespace kvpool::transfer {
namespace {

void PutPrefix(uint8_t* out, uint32_t magic) {
  PutField<uint32_t>(out, 0, magic);
  out[4] = kAuthVersion;
  out[5] = out[6] = out[7] = 0;
}

bool HasPrefix(const uint8_t* in, uint32_t magic) {
  return GetField<uint32_t>(in, 0) == magic && in[4] == kAuthVersion && in[5] == 0 && in[6] == 0 && in[7] == 0;
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitReady(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Exactly `size` bytes, by the deadline; false when the peer closed, failed or was too slow.
bool ReadExactly(int fd, uint8_t* out, size_t size, std::chrono::steady_clock::time_point deadline) {
  size_t got = 0;
  while (got < size) {
    if (!WaitReady(fd, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd, out + got, size - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      return false;
    }
  }
  return true;
}

bool WriteExactly(int fd, const uint8_t* in, size_t size, std::chrono::steady_clock::time_point deadline) {
  size_t sent = 0;
  while (sent < size) {
    if (!WaitReady(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, in + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      return false;
    }
  }
  return true;
}

}  // namespace

void EncodeChallenge(const SharedSecret::Challenge& challenge, uint8_t out[kChallengeSize]) {
  PutPrefix(out, kChallengeMagic);
  std::memcpy(out + 8, challenge.data(), challenge.size());
}

Status DecodeChallenge(const uint8_t in[kChallengeSize], SharedSecret::Challenge* challenge) {
  if (!HasPrefix(in, kChallengeMagic)) return InvalidArgument("not an authentication challenge");
  std::memcpy(challenge->data(), in + 8, challenge->size());
  return Status::Ok();
}

bool StartsLikeChallenge(const uint8_t* in) { return GetField<uint32_t>(in, 0) == kChallengeMagic; }

void EncodeProof(const SharedSecret& secret, std::string_view purpose, const SharedSecret::Challenge& challenge,
                 uint8_t out[kProofSize]) {
  PutPrefix(out, kProofMagic);
  const SharedSecret::Proof proof = secret.Prove(purpose, challenge);
  std::memcpy(out + 8, proof.data(), proof.size());
}

bool CheckProof(const SharedSecret& secret, std::string_view purpose, const SharedSecret::Challenge& challenge,
                const uint8_t in[kProofSize]) {
  if (!HasPrefix(in, kProofMagic)) return false;
  SharedSecret::Proof proof;
  std::memcpy(proof.data(), in + 8, proof.size());
  return secret.Check(purpose, challenge, proof);
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
  uint8_t out[kProofSize];
  EncodeProof(secret, purpose, challenge, out);
  if (!WriteExactly(fd, out, sizeof(out), deadline)) {
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
  uint8_t in[kProofSize];
  if (!ReadExactly(fd, in, sizeof(in), deadline) || !CheckProof(secret, purpose, challenge, in)) {
    return Unauthenticated(fmt::format("{} did not prove it holds the pool's secret", peer));
  }
  return Status::Ok();
}

}  // namespace kvpool::transfer
