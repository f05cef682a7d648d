#include "replay/token_content.h"

#include "engine/kv_pattern.h"

namespace kvpool::replay {
namespace {

// A 31-bit id, like a large vocabulary's; the value only has to be deterministic.
connector::TokenId TokenFrom(uint64_t seed) { return static_cast<connector::TokenId>(engine::Mix64(seed) & 0x7fffffff); }

// Separates tail tokens' seeds from blocks' (an id could equal a position).
constexpr uint64_t kTailTag = 0x7a11'7a11'7a11'7a11ULL;

}  // namespace

std::vector<connector::TokenId> PromptTokens(const trace::BlockIds& hash_ids, int64_t trace_block_size,
                                             int64_t input_tokens, uint64_t session_salt) {
  const size_t n = static_cast<size_t>(input_tokens), block = static_cast<size_t>(trace_block_size);
  std::vector<connector::TokenId> tokens(n);
  for (size_t b = 0; b < hash_ids.size(); ++b) {
    const uint64_t block_seed = engine::Mix64(session_salt ^ engine::Mix64(hash_ids[b]));
    const size_t first = b * block;
    for (size_t i = 0; i < block && first + i < n; ++i) tokens[first + i] = TokenFrom(block_seed + i);
  }
  const uint64_t tail_seed = engine::Mix64(session_salt ^ kTailTag);
  for (size_t p = hash_ids.size() * block; p < n; ++p) tokens[p] = TokenFrom(tail_seed + p);
  return tokens;
}

}  // namespace kvpool::replay
