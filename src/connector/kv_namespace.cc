#include "connector/kv_namespace.h"

#include <xxhash.h>

#include <fmt/format.h>

namespace kvpool::connector {

uint32_t KvModelSpec::total_layers() const {
  uint32_t sum = 0;
  for (uint32_t n : stage_layers) sum += n;
  return sum;
}

uint32_t KvModelSpec::first_layer(uint32_t stage) const {
  uint32_t first = 0;
  for (uint32_t s = 0; s < stage && s < stage_layers.size(); ++s) first += stage_layers[s];
  return first;
}

uint64_t KvModelSpec::stage_object_bytes(uint32_t stage) const {
  return uint64_t{chunk_tokens} * bytes_per_token_per_layer * stage_layers.at(stage);
}

Status KvModelSpec::Validate() const {
  if (model_id.empty()) return InvalidArgument("KV spec: model_id is empty");
  if (kv_dtype.empty()) return InvalidArgument("KV spec: kv_dtype is empty");
  if (bytes_per_token_per_layer == 0) return InvalidArgument("KV spec: bytes_per_token_per_layer is 0");
  if (layout == KvLayoutKind::kSplitKv && bytes_per_token_per_layer % 2 != 0) {
    return InvalidArgument(fmt::format("KV spec: split K/V needs an even bytes_per_token_per_layer, got {}",
                                       bytes_per_token_per_layer));
  }
  if (stage_layers.empty()) return InvalidArgument("KV spec: stage_layers is empty (give one entry per stage)");
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    if (stage_layers[s] == 0) return InvalidArgument(fmt::format("KV spec: stage {} has no layers", s));
  }
  if (block_tokens == 0) return InvalidArgument("KV spec: block_tokens is 0");
  if (chunk_tokens == 0 || chunk_tokens % block_tokens != 0) {
    return InvalidArgument(fmt::format("KV spec: chunk_tokens ({}) must be a positive multiple of block_tokens ({})",
                                       chunk_tokens, block_tokens));
  }
  return Status::Ok();
}

std::string Hex128(uint64_t high, uint64_t low) { return fmt::format("{:016x}{:016x}", high, low); }

std::string KvNamespace::CanonicalText(const KvModelSpec& spec) {
  // Length-prefixed strings so no two specs serialise to the same text.
  std::string split;
  for (size_t s = 0; s < spec.stage_layers.size(); ++s) split += (s ? "," : "") + std::to_string(spec.stage_layers[s]);
  return fmt::format("kvpool-kv-v1|model:{}:{}|dtype:{}:{}|layout:{}|bytes_per_token_layer:{}|stage_layers:{}"
                     "|block_tokens:{}|chunk_tokens:{}",
                     spec.model_id.size(), spec.model_id, spec.kv_dtype.size(), spec.kv_dtype,
                     spec.layout == KvLayoutKind::kLatent ? "latent" : "split_kv", spec.bytes_per_token_per_layer,
                     split, spec.block_tokens, spec.chunk_tokens);
}

Result<KvNamespace> KvNamespace::Create(KvModelSpec spec) {
  KVPOOL_RETURN_IF_ERROR(spec.Validate());
  KvNamespace ns;
  const std::string text = CanonicalText(spec);
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  ns.spec_ = std::move(spec);
  ns.high_ = h.high64;
  ns.low_ = h.low64;
  ns.hex_ = Hex128(h.high64, h.low64);
  return ns;
}

}  // namespace kvpool::connector
