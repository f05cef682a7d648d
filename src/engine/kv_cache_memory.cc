#include "engine/kv_cache_memory.h"

#include <spdlog/spdlog.h>

#include "engine/device_kv_cache.h"
#include "engine/host_kv_cache.h"
#include "engine/kv_pattern.h"

namespace kvpool::engine {
namespace {

class HostKvCacheMemory final : public KvCacheMemory {
 public:
  HostKvCacheMemory(const connector::PagedKvLayout& layout, uint64_t num_blocks) : host_(layout, num_blocks) {}
  const connector::PagedKvCache& cache() const override { return host_.cache(); }
  int cuda_device() const override { return -1; }
  Status WriteKv(std::span<const connector::BlockId> block_table, uint32_t first_layer,
                 std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end) override {
    engine::WriteKv(host_.cache(), block_table, first_layer, block_keys, begin, end);
    return Status();
  }
  Result<uint64_t> CountKvMismatches(std::span<const connector::BlockId> block_table, uint32_t first_layer,
                                     std::span<const uint64_t> block_keys, uint64_t begin, uint64_t end,
                                     const CacheTokens& tokens) override {
    return engine::CountKvMismatches(host_.cache(), block_table, first_layer, block_keys, begin, end, tokens);
  }

 private:
  HostKvCache host_;
};

}  // namespace

uint64_t CountKvMismatchesOrOne(KvCacheMemory& memory, std::span<const connector::BlockId> block_table,
                                uint32_t first_layer, std::span<const uint64_t> block_keys, uint64_t begin,
                                uint64_t end, const CacheTokens& tokens) {
  auto mismatches = memory.CountKvMismatches(block_table, first_layer, block_keys, begin, end, tokens);
  if (mismatches.ok()) return *mismatches;
  spdlog::error("verifying KV: {}", mismatches.status().ToString());
  return 1;
}

Result<std::unique_ptr<KvCacheMemory>> NewKvCacheMemory(const connector::PagedKvLayout& layout, uint64_t num_blocks,
                                                        int cuda_device) {
  if (cuda_device < 0) return std::unique_ptr<KvCacheMemory>(new HostKvCacheMemory(layout, num_blocks));
  return NewDeviceKvCacheMemory(layout, num_blocks, cuda_device);
}

}  // namespace kvpool::engine
