#include "handoff/handoff_piece.h"

#include <fmt/format.h>

#include "common/checksum.h"

namespace kvpool::handoff {

Result<AnnouncedPiece> FindAnnouncedPiece(const ControlMessage& m, const HandoffPlan& plan, uint32_t prefill_rank,
                                          const std::vector<std::vector<bool>>& landed) {
  if (m.b >= plan.decode.dcp_ranks || m.c >= plan.pair(prefill_rank, static_cast<uint32_t>(m.b)).writes.size()) {
    return InvalidArgument(
        fmt::format("request {}: piece {} for decode rank {} is not in the plan", m.request_id, m.c, m.b));
  }
  AnnouncedPiece piece;
  piece.prefill_rank = prefill_rank;
  piece.decode_rank = static_cast<uint32_t>(m.b);
  piece.pair_index = uint64_t{prefill_rank} * plan.decode.dcp_ranks + piece.decode_rank;
  piece.index = m.c;
  if (landed[piece.pair_index][piece.index]) {
    return InvalidArgument(fmt::format("request {}: piece {} of pair ({}, {}) arrived twice", m.request_id, m.c,
                                       prefill_rank, piece.decode_rank));
  }
  piece.pair = &plan.pairs[piece.pair_index];
  piece.write = &piece.pair->writes[piece.index];
  return piece;
}

Status CheckPieceChecksum(const ControlMessage& m, const AnnouncedPiece& piece, std::span<const std::byte> slot) {
  if (piece.write->length > slot.size()) {
    return Internal(fmt::format("request {}: piece {} of pair ({}, {}) is {} B, its landing slot {} B", m.request_id,
                                piece.index, piece.prefill_rank, piece.decode_rank, piece.write->length, slot.size()));
  }
  if (Checksum(slot.data(), piece.write->length) != m.d) {
    return Internal(fmt::format("request {}: piece {} of pair ({}, {}) failed its checksum", m.request_id, piece.index,
                                piece.prefill_rank, piece.decode_rank));
  }
  return Status::Ok();
}

}  // namespace kvpool::handoff
