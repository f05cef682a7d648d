#include "engine/gpu_prefix_cache.h"

#include <cassert>

#include <fmt/format.h>

namespace kvpool::engine {

GpuPrefixCache::GpuPrefixCache(uint64_t num_blocks) : blocks_(num_blocks) {
  free_.reserve(num_blocks);
  // Handed out lowest id first.
  for (uint64_t i = num_blocks; i > 0; --i) free_.push_back(static_cast<BlockId>(i - 1));
}

std::vector<BlockId> GpuPrefixCache::AcquirePrefix(std::span<const uint64_t> block_keys, size_t max_blocks) {
  std::vector<BlockId> out;
  for (size_t i = 0; i < block_keys.size() && i < max_blocks; ++i) {
    auto it = by_key_.find(block_keys[i]);
    if (it == by_key_.end()) break;
    Block& b = blocks_[it->second];
    if (b.refs++ == 0) lru_.erase(b.lru_pos);
    out.push_back(it->second);
  }
  return out;
}

size_t GpuPrefixCache::CountPrefix(std::span<const uint64_t> block_keys) const {
  size_t n = 0;
  while (n < block_keys.size() && by_key_.count(block_keys[n])) ++n;
  return n;
}

Result<std::vector<BlockId>> GpuPrefixCache::AllocateBlocks(size_t count) {
  if (count > available_blocks()) {
    return Unavailable(fmt::format("prefix cache: {} blocks wanted, {} free or evictable of {}", count,
                                   available_blocks(), blocks_.size()));
  }
  std::vector<BlockId> out;
  out.reserve(count);
  while (out.size() < count && !free_.empty()) {
    out.push_back(free_.back());
    free_.pop_back();
  }
  while (out.size() < count) {
    const BlockId id = lru_.front();
    lru_.pop_front();
    Block& b = blocks_[id];
    by_key_.erase(b.key);
    b.has_key = false;
    ++evictions_;
    out.push_back(id);
  }
  for (BlockId id : out) blocks_[id].refs = 1;
  return out;
}

void GpuPrefixCache::Publish(std::span<const uint64_t> block_keys, std::span<const BlockId> block_table,
                             size_t full_blocks) {
  for (size_t i = 0; i < full_blocks; ++i) {
    Block& b = blocks_[block_table[i]];
    assert(b.refs > 0);
    if (b.has_key) continue;
    if (!by_key_.emplace(block_keys[i], block_table[i]).second) continue;
    b.has_key = true;
    b.key = block_keys[i];
  }
}

void GpuPrefixCache::Release(std::span<const BlockId> blocks) {
  for (size_t i = blocks.size(); i > 0; --i) Unreference(blocks[i - 1]);
}

void GpuPrefixCache::Unreference(BlockId id) {
  Block& b = blocks_[id];
  assert(b.refs > 0);
  if (--b.refs > 0) return;
  if (b.has_key) {
    b.lru_pos = lru_.insert(lru_.end(), id);
  } else {
    free_.push_back(id);
  }
}

}  // namespace kvpool::engine
