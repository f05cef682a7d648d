// The control messages of a network handoff (handoff_sender.h / handoff_receiver.h).
//
// The KV bytes never travel here: the sender writes each piece into the receiver's landing
// segment through the transfer engine (shm on one host, tcp across hosts). This socket only
// says which request a piece belongs to, where it landed, and when a request is done.
//
// One message = a fixed 56-byte header (little-endian) + `text_length` bytes of text:
//   magic u32 'KVHC' | version u8 | type u8 | code u16 | text_length u32 | pad u32 |
//   request_id u64 | a u64 | b u64 | c u64 | d u64
// The meaning of a..d and text per type is in ControlType. Any other magic, version, type or
// a text over kMaxControlText closes the connection (INVALID_ARGUMENT): never a guess.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvpool::handoff {

enum class ControlType : uint8_t {
  // receiver -> sender, once after accept: a = landing segment id, b = landing bytes,
  // c = slot bytes (the largest piece), text = "<tcp address>\n<shm socket>\n<host id>".
  kHello = 1,
  // sender -> receiver: request_id, a = prefill rank, b = first token, c = end token,
  // d = layouts fingerprint (both sides must plan with the same layouts).
  kBegin = 2,
  // sender -> receiver: one landing slot, please (blocks while none is free: back-pressure).
  kSlotRequest = 3,
  // receiver -> sender: code, text; a = slot offset in the landing segment.
  kSlotGrant = 4,
  // sender -> receiver: request_id, a = slot offset, b = pair (decode rank), c = piece index,
  // d = xxh3-64 of the piece's bytes (checked before the scatter).
  kPieceWritten = 5,
  // sender -> receiver: request_id; every piece of this rank's part was announced.
  kEnd = 6,
  // receiver -> sender: code, text. Answers kBegin (OK or why not) and kEnd (every piece of
  // this part scattered, or why not).
  kReply = 7,
  // receiver -> sender, first, from a receiver that holds the pool's secret: a, b = the 16
  // challenge bytes (handoff_auth.h).
  kChallenge = 8,
  // sender -> receiver: a..d = the 32 bytes of its proof. The receiver answers a wrong one
  // with kReply UNAUTHENTICATED and closes; a good one with its kHello.
  kProof = 9,
};

inline constexpr uint32_t kControlMagic = 0x4348564b;  // "KVHC"
inline constexpr uint8_t kControlVersion = 1;
inline constexpr uint32_t kMaxControlText = 4096;

struct ControlMessage {
  ControlType type = ControlType::kReply;
  StatusCode code = StatusCode::kOk;
  uint64_t request_id = 0;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  std::string text;

  Status status() const { return Status(code, text); }
};

using ControlDeadline = std::chrono::steady_clock::time_point;

// Writes one message; UNAVAILABLE when the peer is gone, TIMEOUT past the deadline.
Status SendControl(int fd, const ControlMessage& message, ControlDeadline deadline);
// Reads one message; UNAVAILABLE when the peer closed, TIMEOUT past the deadline,
// INVALID_ARGUMENT for bytes that are not a message of this protocol.
Result<ControlMessage> ReceiveControl(int fd, ControlDeadline deadline);

}  // namespace kvpool::handoff

namespace kvpool::handoff {
struct PrefillLayout;
struct DecodeLayout;
// 64-bit fingerprint of both layouts (kBegin's d): a sender and a receiver configured with
// different layouts would put bytes in the wrong places, so they refuse each other.
uint64_t LayoutsFingerprint(const PrefillLayout& prefill, const DecodeLayout& decode);
}  // namespace kvpool::handoff
