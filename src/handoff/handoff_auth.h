// The proof of the pool's secret (common/shared_secret.h) on a handoff's control socket.
//
// A receiver started with a secret speaks first with kChallenge; the sender answers kProof
// (HMAC-SHA256 over purpose "handoff-control" and the challenge); the receiver checks it and
// then sends its kHello as before, or kReply UNAUTHENTICATED and closes. A receiver without a
// secret sends its kHello at once. A sender holding a secret accepts no receiver that does not
// ask for it (it would be writing KV to a receiver nobody vouched for); a sender without one
// that meets a challenge fails with UNAUTHENTICATED, saying what to give it.
// The landing segment's own tcp and shm sockets ask for the same secret (transfer/auth_handshake.h).
#pragma once

#include <optional>
#include <string>

#include "common/shared_secret.h"
#include "handoff/handoff_control.h"

namespace kvpool::handoff {

inline constexpr std::string_view kControlPurpose = "handoff-control";

// The receiver's side, before its hello. UNAUTHENTICATED (after telling the sender) for a
// missing or wrong proof; UNAVAILABLE / TIMEOUT when the sender went away or stayed silent.
Status DemandSenderProof(int fd, const SharedSecret& secret, ControlDeadline deadline);

// The sender's side: reads the receiver's first message and returns its hello, proving
// `secret` first when asked. UNAUTHENTICATED when one side holds a secret and the other
// does not, or the receiver refused the proof.
Result<ControlMessage> ReceiveHello(int fd, const std::optional<SharedSecret>& secret, const std::string& receiver,
                                    ControlDeadline deadline);

}  // namespace kvpool::handoff
