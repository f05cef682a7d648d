// KvNamespace: the fingerprint of everything that makes stored KV bytes incompatible.
//
// Two engines may share a chunk only if their KV bytes for the same tokens are identical and
// laid out the same way, so every chunk key is chained from a namespace id that hashes the
// model, the KV dtype, the layer count and how layers are split over pipeline stages, the
// bytes each token takes per layer (and whether K and V are stored apart), the paged-cache
// block size and the chunk size. Changing any of these starts a fresh, disjoint key space.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvpool::connector {

// How one token's KV for one layer is stored in the paged cache.
enum class KvLayoutKind {
  // One vector per token per layer (MLA latent + rope, e.g. 576 B): one cache array per layer.
  kLatent,
  // K and V in separate cache arrays per layer (GQA), each half of bytes_per_token_per_layer.
  kSplitKv,
};

// Everything about a model deployment that decides its KV bytes. Plain data.
struct KvModelSpec {
  std::string model_id;                   // e.g. "deepseek-v3@rev" — anything naming the weights
  std::string kv_dtype;                   // e.g. "bf16", "fp8_e4m3"
  KvLayoutKind layout = KvLayoutKind::kLatent;
  uint32_t bytes_per_token_per_layer = 0;  // K+V together for kSplitKv
  // Layers per pipeline stage, in stage order; its sum is the model's layer count.
  std::vector<uint32_t> stage_layers;
  uint32_t block_tokens = 16;   // tokens per paged-cache block
  uint32_t chunk_tokens = 256;  // tokens per stored chunk. REQUIRES: a multiple of block_tokens

  uint32_t num_stages() const { return static_cast<uint32_t>(stage_layers.size()); }
  uint32_t total_layers() const;
  // First global layer of `stage`.
  uint32_t first_layer(uint32_t stage) const;
  // Bytes of one stage object: chunk_tokens tokens x that stage's layers.
  uint64_t stage_object_bytes(uint32_t stage) const;

  // INVALID_ARGUMENT naming the first field that makes no sense.
  Status Validate() const;
};

// A validated spec and its 128-bit fingerprint. Immutable; cheap to copy.
class KvNamespace {
 public:
  // Validates `spec` and fingerprints it.
  static Result<KvNamespace> Create(KvModelSpec spec);

  const KvModelSpec& spec() const { return spec_; }
  uint64_t id_high() const { return high_; }
  uint64_t id_low() const { return low_; }
  // 32 lowercase hex digits; the first component of every object key of this namespace.
  const std::string& hex() const { return hex_; }

  // The canonical text that is hashed; exposed so tests and logs can show what was covered.
  static std::string CanonicalText(const KvModelSpec& spec);

 private:
  KvNamespace() = default;
  KvModelSpec spec_;
  uint64_t high_ = 0, low_ = 0;
  std::string hex_;
};

// 32 lowercase hex digits of a 128-bit value, high half first.
std::string Hex128(uint64_t high, uint64_t low);

}  // namespace kvpool::connector
