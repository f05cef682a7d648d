#include "connector/chunk_store.h"

namespace kvpool::connector {

std::shared_ptr<const client::LookupResult> PoolChunkStore::Lookup(std::span<const std::string> keys) {
  return std::make_shared<const client::LookupResult>(client_->BatchLookup(keys));
}

std::vector<Result<uint64_t>> PoolChunkStore::Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                                   std::span<const client::ValueBuffer> buffers) {
  return client_->ReadLookedUp(lookup, indices, buffers);
}

Result<std::vector<bool>> PoolChunkStore::Exists(std::span<const std::string> keys) {
  return client_->BatchExists(keys);
}

std::vector<Status> PoolChunkStore::Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                                        std::span<const std::string> groups) {
  std::vector<Status> out;
  out.reserve(keys.size());
  size_t begin = 0;
  while (begin < keys.size()) {
    size_t end = begin + 1;
    while (end < keys.size() && groups[end] == groups[begin]) ++end;
    client::PutOptions options;
    options.group = groups[begin];
    std::vector<Status> part =
        client_->BatchPut(keys.subspan(begin, end - begin), values.subspan(begin, end - begin), options);
    for (Status& s : part) out.push_back(std::move(s));
    begin = end;
  }
  return out;
}

}  // namespace kvpool::connector
