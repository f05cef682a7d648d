// A landed piece as the handoff receiver checks it (handoff_receiver.h) before anything is
// scattered: the sender's kPieceWritten announcement (handoff_control.h: a = slot offset,
// b = decode rank, c = piece index, d = xxh3-64 of the bytes) against the request's plan and
// the landing slot the piece was written into.
//
// Pure functions of their arguments, so that the fuzzer (fuzz/handoff_piece_fuzz.cc) feeds
// announcements directly. The receiver itself checks that the slot and the request's part
// belong to the announcing connection, and holds the request's lock around FindAnnouncedPiece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "handoff/handoff_control.h"
#include "handoff/handoff_plan.h"

namespace kvpool::handoff {

// One write of the plan, named by an announcement.
struct AnnouncedPiece {
  uint32_t prefill_rank = 0;
  uint32_t decode_rank = 0;
  uint64_t pair_index = 0;  // into plan.pairs and `landed`
  uint64_t index = 0;       // into the pair's writes
  const PairPlan* pair = nullptr;      // into the plan
  const HandoffWrite* write = nullptr;  // pair->writes[index]
};

// The piece `m` (a kPieceWritten) names among prefill rank `prefill_rank`'s writes of `plan`:
// INVALID_ARGUMENT when its decode rank or index is not in the plan, or when `landed` (one flag
// per write, [pair index][piece], as the receiver keeps them) says it arrived already.
// REQUIRES: prefill_rank < plan.prefill.num_ranks(); `landed` shaped like plan.pairs' writes.
Result<AnnouncedPiece> FindAnnouncedPiece(const ControlMessage& m, const HandoffPlan& plan, uint32_t prefill_rank,
                                          const std::vector<std::vector<bool>>& landed);

// The piece's bytes, at the start of its landing `slot`, hash to the announced m.d. INTERNAL
// when they do not, or when the piece is larger than the slot (no byte past it is read).
Status CheckPieceChecksum(const ControlMessage& m, const AnnouncedPiece& piece, std::span<const std::byte> slot);

}  // namespace kvpool::handoff
