// Token ids for a trace prompt, derived from its block ids (hash_ids), so that two prompts
// share a token prefix exactly where the trace says they share blocks — and therefore share
// chained chunk and block keys exactly there.
//
// Each hash id stands for `trace_block_size` fixed tokens. `session_salt` separates
// sessions: AgentX ids are local to a trace, so two sessions (or two replays of one trace by
// different lanes) must never share KV by accident.
#pragma once

#include <cstdint>
#include <vector>

#include "connector/chunk_keys.h"
#include "trace/block_ids.h"

namespace kvpool::replay {

// The first `input_tokens` tokens of the blocks `hash_ids` (the last block may be partial,
// as in Mooncake traces). Tokens past the last block — the id-less partial tail block of a
// real AgentX prompt — depend only on the salt and their position: never a hit against
// another session, and within a session equal only where an earlier prompt had the same
// blocks and a tail at the same positions (what a GPU prefix cache may then hold).
std::vector<connector::TokenId> PromptTokens(const trace::BlockIds& hash_ids, int64_t trace_block_size,
                                             int64_t input_tokens, uint64_t session_salt);

}  // namespace kvpool::replay
