#include "connector/first_tokens_marker.h"

#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

namespace kvpool::connector {

std::string FirstTokensMarkerKey(std::span<const TokenId> tokens) {
  if (tokens.size() < kMarkerTokens) return "";
  return fmt::format("kvpool-first-tokens/{:016x}", XXH3_64bits(tokens.data(), kMarkerTokens * sizeof(TokenId)));
}

std::optional<std::string> OtherNamespaceOf(ChunkStore& store, const KvNamespace& ns, const std::string& marker_key) {
  if (marker_key.empty()) return std::nullopt;
  const std::string keys[] = {marker_key};
  const std::shared_ptr<const client::LookupResult> found = store.Lookup(keys);
  if (found->size() != 1 || !found->length(0).ok() || *found->length(0) > kMaxMarkerBytes) return std::nullopt;
  std::vector<std::byte> bytes(*found->length(0));
  const size_t index[] = {0};
  const client::ValueBuffer buffers[] = {bytes};
  if (!store.Read(*found, index, buffers, client::ChecksumCheck::kBeforeAnswer)[0].ok()) return std::nullopt;
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text == KvNamespace::CanonicalText(ns.spec())) return std::nullopt;
  return text;
}

}  // namespace kvpool::connector
