#include "engine/model_geometry.h"

#include <fmt/format.h>

namespace kvpool::engine {
namespace {

// The published server (design.md): 8 GPUs = one PP4 prefill instance + one TP4/DCP4 decode
// instance; 78 layers split 20/20/20/18; 624 B per token-layer (48,672 B per token);
// 256-token chunks, 16-token blocks, an MLA-like latent (one plane per layer).
constexpr uint32_t kPublishedBytesPerTokenLayer = 624;
const std::vector<uint32_t> kPublishedStageLayers = {20, 20, 20, 18};

// Token capacities of the published server. ~0.4 TiB of prefill GPU KV / 48,672 B = ~9.0M
// tokens; the decode instance has the same GPUs and about as much room; the pool ("~1 TiB+
// for ~100 sessions of ~10 GiB history") is 1.42 TiB = 32M tokens: room for ~110 live
// histories of ~200K tokens plus the dead prefixes divergence and compaction leave behind,
// below the master's 90% eviction watermark.
constexpr uint64_t kPublishedPrefillCacheTokens = 9'000'000;
constexpr uint64_t kPublishedDecodeKvTokens = 9'000'000;
constexpr uint64_t kPublishedPoolTokens = 32'000'000;

ModelGeometry Base(std::string name) {
  ModelGeometry g;
  g.name = std::move(name);
  g.spec.model_id = "kvpool-replay";
  g.spec.kv_dtype = "fp8";
  g.spec.layout = connector::KvLayoutKind::kLatent;
  g.spec.block_tokens = 16;
  g.spec.chunk_tokens = 256;
  g.reference_stage_layers = kPublishedStageLayers;
  g.reference_bytes_per_token_per_layer = kPublishedBytesPerTokenLayer;
  g.prefill_cache_tokens = kPublishedPrefillCacheTokens;
  g.decode_kv_tokens = kPublishedDecodeKvTokens;
  g.pool_tokens = kPublishedPoolTokens;
  return g;
}

}  // namespace

uint64_t ModelGeometry::bytes_per_token() const {
  return uint64_t{spec.bytes_per_token_per_layer} * spec.total_layers();
}

uint64_t ModelGeometry::reference_bytes_per_token() const {
  uint64_t layers = 0;
  for (uint32_t l : reference_stage_layers) layers += l;
  return layers * reference_bytes_per_token_per_layer;
}

uint64_t ModelGeometry::reference_stage_bytes_per_token(uint32_t stage) const {
  return uint64_t{reference_stage_layers.at(stage)} * reference_bytes_per_token_per_layer;
}

uint64_t ModelGeometry::pool_bytes() const { return pool_tokens * bytes_per_token(); }

Status ModelGeometry::Validate() const {
  KVPOOL_RETURN_IF_ERROR(spec.Validate());
  if (reference_stage_layers.size() != spec.num_stages()) {
    return InvalidArgument(fmt::format("geometry {}: {} reference stages for {} stages", name,
                                       reference_stage_layers.size(), spec.num_stages()));
  }
  if (decode_dcp_ranks < 1 || decode_dcp_interleave < 1 || decode_dcp_ranks > 64) {
    return InvalidArgument(fmt::format("geometry {}: decode DCP needs 1-64 ranks and an interleave >= 1", name));
  }
  if (prefill_cache_tokens < 4 * uint64_t{spec.chunk_tokens} ||
      decode_kv_tokens < uint64_t{decode_dcp_ranks} * spec.block_tokens ||
      max_batched_tokens < spec.block_tokens) {
    return InvalidArgument(fmt::format("geometry {}: caches and batch budget are too small", name));
  }
  return Status::Ok();
}

Result<ModelGeometry> GeometryPreset(std::string_view name) {
  if (name == "published") {
    ModelGeometry g = Base("published");
    g.spec.stage_layers = kPublishedStageLayers;
    g.spec.bytes_per_token_per_layer = kPublishedBytesPerTokenLayer;
    return g;
  }
  if (name == "scaled" || name == "tiny") {
    // One 8-byte layer per stage: 32 B per token, 1/1521 of the published bytes. Four stages
    // stay four, so a prefix still hits only as far as every stage holds it.
    ModelGeometry g = Base(std::string(name));
    g.spec.stage_layers = {1, 1, 1, 1};
    g.spec.bytes_per_token_per_layer = 8;
    if (name == "tiny") {
      // Tests: a GPU cache smaller than two live sessions, so the pool has work to do.
      g.prefill_cache_tokens = 160'000;
      g.decode_kv_tokens = 1'500'000;
      g.pool_tokens = 1'500'000;  // 48 MB
    }
    return g;
  }
  return InvalidArgument(fmt::format("unknown geometry preset '{}' (choose scaled, published or tiny)", name));
}

std::vector<std::string> GeometryPresetNames() { return {"scaled", "published", "tiny"}; }

}  // namespace kvpool::engine
