// The handoff receiver's landing pieces (handoff/handoff_piece.h): a sender's kPieceWritten
// announcements (decode rank, piece index, checksum, landing slot), checked against the plan of
// a request as HandoffReceiver::Land does before it scatters.
// Input: 11 bytes pick the layouts (kind, bytes per token, block sizes, PP stages, DCP ranks,
// interleave), the token range and the slot size; then announcements of 5 bytes each: prefill
// rank, decode rank, 16-bit piece index, flags (bit 0: the right checksum, else 8 more bytes
// carry one; bits 1-2: the rank or index past 2^32; bit 3: the second slot).
// Checked: an accepted piece is a write of the announcing rank's pair with that decode rank,
// not landed before, inside its landing slot and inside its pair's gather buffer; a piece
// whose checksum matches scatters into the decode cache, within its blocks (ASan watches the
// cache's edges).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include <xxhash.h>

#include "handoff/handoff_copy.h"
#include "handoff/handoff_piece.h"
#include "handoff/handoff_plan.h"
#include "handoff/test_handoff_caches.h"

using namespace kvpool;
using namespace kvpool::handoff;

namespace {

constexpr size_t kHeader = 11;
constexpr uint32_t kLatentBytes[] = {576, 64, 36, 7, 16, 1, 128, 3};
constexpr uint32_t kSplitBytes[] = {512, 72, 36, 8, 2, 4, 128, 6};
constexpr uint32_t kBlockTokens[] = {1, 3, 4, 7, 16, 64, 2, 5};
constexpr uint32_t kInterleave[] = {1, 2, 3, 16, 5, 4, 7, 64};

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeader) return 0;
  PrefillLayout prefill;
  DecodeLayout decode;
  prefill.kind = decode.kind = (data[0] & 1) ? KvLayoutKind::kSplitKv : KvLayoutKind::kLatent;
  prefill.bytes_per_token_per_layer = decode.bytes_per_token_per_layer =
      ((data[0] & 1) ? kSplitBytes : kLatentBytes)[(data[0] >> 1) & 7];
  prefill.block_tokens = kBlockTokens[data[1] & 7];
  for (uint32_t p = 0; p <= (data[2] & 3u); ++p) prefill.stage_layers.push_back(1 + ((data[3] >> (2 * p)) & 3));
  decode.num_layers = prefill.total_layers();
  decode.block_tokens = kBlockTokens[data[4] & 7];
  decode.dcp_ranks = 1 + data[5] % 8;
  decode.interleave = kInterleave[data[6] & 7];
  const uint64_t first_token = data[7];
  const uint64_t end_token = first_token + 1 + data[8];
  const uint32_t row_bytes = decode.RankLayout().plane_token_bytes();
  const uint64_t slot_bytes = uint64_t{row_bytes} * (1 + data[9] % 16) + data[10] % std::max(row_bytes, 1u);
  auto planned = PlanHandoff(prefill, decode, first_token, end_token, {slot_bytes});
  if (!planned.ok()) return 0;
  const HandoffPlan& plan = *planned;

  // Decode caches holding exactly the blocks the request needs, as Expect checks them.
  std::vector<testing::HostCache> caches;
  std::vector<std::vector<BlockId>> tables;
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    const uint64_t local_end = decode.token_map().CountBelow(d, end_token);
    const uint64_t blocks = std::max<uint64_t>(1, (local_end + decode.block_tokens - 1) / decode.block_tokens);
    caches.emplace_back(decode.RankLayout(), blocks);
    std::vector<BlockId>& table = tables.emplace_back(blocks);
    for (uint64_t b = 0; b < blocks; ++b) table[b] = static_cast<BlockId>(blocks - 1 - b);  // any order
  }
  std::vector<std::vector<bool>> landed(plan.pairs.size());
  for (size_t i = 0; i < plan.pairs.size(); ++i) {
    const PairPlan& pair = plan.pairs[i];
    Require(CheckScatter(pair, caches[pair.decode_rank].cache(), tables[pair.decode_rank]).ok());
    landed[i].assign(pair.writes.size(), false);
  }
  std::vector<std::byte> landing(2 * slot_bytes, std::byte{0x5a});

  for (size_t at = kHeader; at + 5 <= size;) {
    const uint32_t rank = data[at] % prefill.num_ranks();  // Begin admitted the connection's rank
    const uint8_t flags = data[at + 4];
    ControlMessage m;
    m.type = ControlType::kPieceWritten;
    m.request_id = 1;
    m.b = data[at + 1] | ((flags & 2) ? uint64_t{1} << 32 : 0);
    m.c = (data[at + 2] | (data[at + 3] << 8)) | ((flags & 4) ? uint64_t{1} << 32 : 0);
    m.a = (flags & 8) ? slot_bytes : 0;
    at += 5;
    if ((flags & 1) == 0 && at + 8 <= size) {
      std::memcpy(&m.d, data + at, 8);
      at += 8;
    }
    auto piece = FindAnnouncedPiece(m, plan, rank, landed);
    if (!piece.ok()) {
      Require(piece.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    // The announcing rank's pair with the named decode rank, a write of it not landed before.
    Require(piece->prefill_rank == rank && piece->decode_rank == m.b && piece->index == m.c);
    Require(piece->pair_index == uint64_t{rank} * decode.dcp_ranks + m.b && piece->pair == &plan.pairs[piece->pair_index]);
    Require(piece->pair->prefill_rank == rank && piece->pair->decode_rank == m.b);
    Require(piece->write == &piece->pair->writes[m.c] && !landed[piece->pair_index][m.c]);
    // Inside its slot, and inside its pair's gather buffer, whole rows.
    const HandoffWrite& w = *piece->write;
    Require(w.length > 0 && w.length <= slot_bytes && w.length == w.num_rows * piece->pair->plane_token_bytes);
    Require(w.offset <= piece->pair->bytes() && w.length <= piece->pair->bytes() - w.offset);
    Require(w.first_row + w.num_rows <= piece->pair->num_rows());
    landed[piece->pair_index][m.c] = true;

    const std::span<const std::byte> slot(landing.data() + m.a, slot_bytes);
    if (flags & 1) m.d = XXH3_64bits(slot.data(), w.length);
    if (!CheckPieceChecksum(m, *piece, slot).ok()) continue;
    Require(ScatterCpu(*piece->pair, slot.data(), caches[m.b].cache(), tables[m.b], &w).ok());
  }
  return 0;
}
