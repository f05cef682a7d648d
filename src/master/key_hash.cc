#include "master/key_hash.h"

#include <xxhash.h>

namespace kvpool::master {

size_t KeyHash::operator()(std::string_view key) const {
  return static_cast<size_t>(XXH3_64bits(key.data(), key.size()));
}

}  // namespace kvpool::master
