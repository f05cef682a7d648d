// GpuPrefixCache: the block allocator and prefix cache of one paged KV cache (one prefill
// instance's GPUs: all its stages use the same block ids), like vLLM's automatic prefix
// caching.
//
// Blocks are found by chained block keys (kv_pattern.h): the key of block i names the whole
// prefix up to the end of block i, so "the first k keys are held" means "the first
// k * block_tokens tokens' KV is here". Each block is in exactly one state:
//   * referenced (ref > 0): in use by running requests; never evicted;
//   * cached (ref == 0, has a key): holds reusable KV; evictable, least recently used first;
//   * free (ref == 0, no key).
// A request takes its prefix with AcquirePrefix, the rest with AllocateBlocks, publishes its
// full blocks with Publish once their KV is written, and drops its references with Release.
// Single-threaded (the replay's event loop).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "connector/paged_kv_layout.h"

namespace kvpool::engine {

// The longest prefix of an n-token prompt a cache may serve, in whole `block`s: at least one
// token is always computed (it yields the first output token), so it stops at the last full
// block before it. REQUIRES: n >= 1.
inline uint64_t CacheablePrefix(uint64_t n, uint32_t block) { return (n - 1) / block * block; }

using connector::BlockId;

class GpuPrefixCache {
 public:
  explicit GpuPrefixCache(uint64_t num_blocks);

  // Takes a reference on the blocks holding the longest run of leading `block_keys` (at most
  // `max_blocks` of them) and returns their ids, in order.
  std::vector<BlockId> AcquirePrefix(std::span<const uint64_t> block_keys, size_t max_blocks);
  // How many leading `block_keys` are held, without taking anything.
  size_t CountPrefix(std::span<const uint64_t> block_keys) const;

  // `count` blocks with no content, referenced: free ones first, then the least recently
  // used cached ones (dropping their keys). UNAVAILABLE, changing nothing, when fewer than
  // `count` blocks are free or cached.
  Result<std::vector<BlockId>> AllocateBlocks(size_t count);

  // Marks block_table[i] as holding block_keys[i] for i < full_blocks. A block already
  // holding its key is left alone; if another block holds the key, this one stays anonymous
  // (it is freed on Release). REQUIRES: the caller references those blocks and their KV is
  // complete.
  void Publish(std::span<const uint64_t> block_keys, std::span<const BlockId> block_table, size_t full_blocks);

  // Drops one reference on each block. Blocks are released tail first, so a prefix outlives
  // its tail in the LRU order (a later turn needs the prefix first).
  void Release(std::span<const BlockId> blocks);

  uint64_t num_blocks() const { return blocks_.size(); }
  uint64_t free_blocks() const { return free_.size(); }
  uint64_t cached_blocks() const { return lru_.size(); }
  // Blocks AllocateBlocks could hand out now.
  uint64_t available_blocks() const { return free_.size() + lru_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Block {
    uint32_t refs = 0;
    bool has_key = false;
    uint64_t key = 0;
    std::list<BlockId>::iterator lru_pos;  // valid iff refs == 0 && has_key
  };
  void Unreference(BlockId id);

  std::vector<Block> blocks_;
  std::vector<BlockId> free_;
  std::list<BlockId> lru_;  // front = least recently used
  std::unordered_map<uint64_t, BlockId> by_key_;
  uint64_t evictions_ = 0;
};

}  // namespace kvpool::engine
