// The first-tokens marker: tells a key mismatch from a plain miss (issue 44, "why a lookup
// missed"). Every chunk key is chained from the namespace (kv_namespace.h), so an engine whose
// model id, KV dtype, layout, block or chunk size differs from the one that saved a prompt
// finds nothing of it — the same silence as a prompt never seen, and the most reported failure
// of peers' pools (a hit rate of 0% with nothing to say why).
//
// A save that puts a request's chunk 0 also puts one small object keyed by the prompt's first
// kMarkerTokens tokens alone (no namespace), holding the saving namespace's canonical text.
// Objects are immutable: the first namespace to save those tokens owns the marker until it is
// evicted (a later save of chunk 0 puts it again). A lookup that finds nothing from chunk 0 on
// reads it; another namespace's text there is a mismatch, and says which field differs. Agents
// resend one system prompt, so one marker covers every session that begins with it.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "connector/chunk_keys.h"
#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"

namespace kvpool::connector {

inline constexpr size_t kMarkerTokens = 64;
// Markers hold a canonical text, far shorter than this; a longer object is not one.
inline constexpr size_t kMaxMarkerBytes = 4096;

// "kvpool-first-tokens/<hash of tokens[0, kMarkerTokens)>"; "" for a shorter prompt.
std::string FirstTokensMarkerKey(std::span<const TokenId> tokens);

// The canonical text of the namespace that put `marker_key` when it is not `ns`; nullopt when
// there is no marker, it is ours, or it cannot be read (the lookup then stays a plain miss).
std::optional<std::string> OtherNamespaceOf(ChunkStore& store, const KvNamespace& ns, const std::string& marker_key);

}  // namespace kvpool::connector
