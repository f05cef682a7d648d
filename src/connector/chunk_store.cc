#include "connector/chunk_store.h"

namespace kvpool::connector {

std::shared_ptr<const client::LookupResult> PoolChunkStore::Lookup(std::span<const std::string> keys) {
  return std::make_shared<const client::LookupResult>(client_->BatchLookup(keys));
}

std::vector<Result<uint64_t>> PoolChunkStore::Read(const client::LookupResult& lookup, std::span<const size_t> indices,
                                                   std::span<const client::ValueBuffer> buffers,
                                                   client::ChecksumCheck check) {
  return client_->ReadLookedUp(lookup, indices, buffers, check);
}

Result<std::vector<bool>> PoolChunkStore::Exists(std::span<const std::string> keys) {
  return client_->BatchExists(keys);
}

std::vector<Status> PoolChunkStore::Put(std::span<const std::string> keys, std::span<const client::ValueView> values,
                                        std::span<const std::string> groups) {
  return client_->BatchPut(keys, values, {}, groups);
}

Result<transfer::MappedRange> PoolChunkStore::Map(const client::LookupResult& lookup, size_t index) {
  return client_->MapLookedUp(lookup, index);
}

}  // namespace kvpool::connector
