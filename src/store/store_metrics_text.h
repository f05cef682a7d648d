// Prometheus text of a storage service's state, for its /metrics (`kvpool store
// --metrics-listen`): its segment, its copy of the index, mounts and rejoins, and its SSD tier
// with what moved in and out of it (bytes and the file's busy seconds: rate(bytes) / rate(
// seconds) is the tier's GB/s while it works). Every series carries the store's id.
#pragma once

#include <string>

namespace kvpool::store {

class StorageService;

void AppendStoreMetrics(const StorageService& store, std::string* out);

}  // namespace kvpool::store
