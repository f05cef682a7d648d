#include "trace/block_ids.h"

#include <algorithm>

namespace kvpool::trace {

BlockIds::BlockIds(std::vector<uint64_t> ids)
    : buffer_(std::make_shared<std::vector<uint64_t>>(std::move(ids))), size_(buffer_->size()) {}

bool operator==(const BlockIds& a, const BlockIds& b) {
  const auto x = a.view(), y = b.view();
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

BlockIds BlockIdsBuilder::Share(std::span<const uint64_t> ids) {
  const std::span<const uint64_t> have = current();
  const size_t common = std::min(have.size(), ids.size());
  if (std::equal(ids.begin(), ids.begin() + common, have.begin())) {
    if (ids.size() <= have.size()) return Prefix(ids.size());
    Append(ids.subspan(have.size()));
    return Snapshot();
  }
  Restart();
  Append(ids);
  return Snapshot();
}

}  // namespace kvpool::trace
