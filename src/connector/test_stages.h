// Test-only: one HostKvCache per pipeline stage of a spec, and StageDevices pointing at them.
#pragma once

#include <memory>
#include <vector>

#include "connector/staging_buffer.h"
#include "connector/test_kv_cache.h"

namespace kvpool::connector::testing {

struct HostStages {
  HostStages(const KvModelSpec& spec, uint64_t num_blocks) {
    for (uint32_t s = 0; s < spec.num_stages(); ++s) {
      caches.push_back(std::make_unique<HostKvCache>(PagedKvLayout::ForStage(spec, s), num_blocks));
    }
  }
  std::vector<StageDevice> Devices() const {
    std::vector<StageDevice> out;
    for (auto& c : caches) out.push_back(StageDevice{c->cache(), -1});
    return out;
  }
  void FillRandom(uint64_t seed) {
    for (size_t s = 0; s < caches.size(); ++s) caches[s]->FillRandom(seed * 31 + s);
  }
  std::vector<std::unique_ptr<HostKvCache>> caches;
};

}  // namespace kvpool::connector::testing
