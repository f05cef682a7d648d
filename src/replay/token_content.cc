#include "replay/token_content.h"

#include "replay/kv_pattern.h"

namespace kvpool::replay {

std::vector<connector::TokenId> PromptTokens(const trace::BlockIds& hash_ids, int64_t trace_block_size,
                                             int64_t input_tokens, uint64_t session_salt) {
  std::vector<connector::TokenId> tokens(static_cast<size_t>(input_tokens));
  for (size_t b = 0; b < hash_ids.size(); ++b) {
    const uint64_t block_seed = Mix64(session_salt ^ Mix64(hash_ids[b]));
    const size_t first = b * static_cast<size_t>(trace_block_size);
    for (size_t i = 0; i < static_cast<size_t>(trace_block_size) && first + i < tokens.size(); ++i) {
      // A 31-bit id, like a large vocabulary's; the value only has to be deterministic.
      tokens[first + i] = static_cast<connector::TokenId>(Mix64(block_seed + i) & 0x7fffffff);
    }
  }
  return tokens;
}

}  // namespace kvpool::replay
