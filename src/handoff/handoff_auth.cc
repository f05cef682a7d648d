#include "handoff/handoff_auth.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace kvpool::handoff {
namespace {

// The challenge travels in a and b, the proof in a..d: fixed-size fields of the header, so
// the control protocol needs no binary text.
template <size_t N>
void ToFields(const std::array<uint8_t, N>& bytes, ControlMessage& m) {
  static_assert(N % 8 == 0 && N <= 32);
  uint64_t* fields[] = {&m.a, &m.b, &m.c, &m.d};
  for (size_t i = 0; i < N / 8; ++i) std::memcpy(fields[i], bytes.data() + 8 * i, 8);
}
template <size_t N>
std::array<uint8_t, N> FromFields(const ControlMessage& m) {
  static_assert(N % 8 == 0 && N <= 32);
  const uint64_t fields[] = {m.a, m.b, m.c, m.d};
  std::array<uint8_t, N> bytes;
  for (size_t i = 0; i < N / 8; ++i) std::memcpy(bytes.data() + 8 * i, &fields[i], 8);
  return bytes;
}

}  // namespace

Status DemandSenderProof(int fd, const SharedSecret& secret, ControlDeadline deadline) {
  const SharedSecret::Challenge challenge = SharedSecret::NewChallenge();
  ControlMessage ask;
  ask.type = ControlType::kChallenge;
  ToFields(challenge, ask);
  KVPOOL_RETURN_IF_ERROR(SendControl(fd, ask, deadline));
  Result<ControlMessage> answer = ReceiveControl(fd, deadline);
  if (!answer.ok()) return answer.status();
  if (answer->type == ControlType::kProof &&
      secret.Check(kControlPurpose, challenge, FromFields<SharedSecret::kProofBytes>(*answer))) {
    return Status::Ok();
  }
  const Status refused = Unauthenticated(
      answer->type == ControlType::kProof ? "handoff receiver: the sender holds another secret than the pool's"
                                          : "handoff receiver: the sender did not prove the pool's secret");
  ControlMessage verdict;
  verdict.type = ControlType::kReply;
  verdict.code = refused.code();
  verdict.text = refused.message();
  (void)SendControl(fd, verdict, deadline);  // best effort: the connection closes either way
  return refused;
}

Result<ControlMessage> ReceiveHello(int fd, const std::optional<SharedSecret>& secret, const std::string& receiver,
                                    ControlDeadline deadline) {
  Result<ControlMessage> first = ReceiveControl(fd, deadline);
  if (!first.ok()) return first.status();
  if (first->type == ControlType::kHello) {
    if (!secret) return first;
    return Unauthenticated(fmt::format(
        "handoff sender: {} did not ask for the pool's secret; a receiver without --auth-file is not trusted with KV",
        receiver));
  }
  if (first->type != ControlType::kChallenge) {
    return InvalidArgument(fmt::format("handoff sender: {} is not a handoff receiver", receiver));
  }
  if (!secret) {
    return Unauthenticated(fmt::format(
        "handoff sender: {} asks for the pool's secret: give this process the pool's --auth-file", receiver));
  }
  ControlMessage proof;
  proof.type = ControlType::kProof;
  ToFields(secret->Prove(kControlPurpose, FromFields<SharedSecret::kChallengeBytes>(*first)), proof);
  KVPOOL_RETURN_IF_ERROR(SendControl(fd, proof, deadline));
  Result<ControlMessage> hello = ReceiveControl(fd, deadline);
  if (!hello.ok()) return hello.status();
  if (hello->type == ControlType::kReply && hello->code == StatusCode::kUnauthenticated) {
    return Unauthenticated(fmt::format("handoff sender: {} refused this process's secret: it holds another one",
                                       receiver));
  }
  return hello;
}

}  // namespace kvpool::handoff
