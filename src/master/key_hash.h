// Key hashing for the master's maps: one xxh3 hash, computed once per key, used both to pick
// a shard and inside the shard's map. Transparent, so lookups by string_view or HashedKey do
// not build a std::string.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvpool::master {

// A key with its hash computed once: hot paths need the hash twice (shard, then bucket).
struct HashedKey {
  std::string_view key;
  size_t hash = 0;
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view key) const;
  size_t operator()(const HashedKey& key) const { return key.hash; }
};
struct KeyEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  bool operator()(const HashedKey& a, std::string_view b) const { return a.key == b; }
  bool operator()(std::string_view a, const HashedKey& b) const { return a == b.key; }
};

}  // namespace kvpool::master
