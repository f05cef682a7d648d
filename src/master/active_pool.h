// ActivePool: the PoolMetadata a master serves calls with. A lone master has one for its whole
// life; one of several masters in an etcd election has one only while it leads its part (a
// fresh one at each win: a new leader knows nothing until the stores rejoin, so it can never
// hand out a stale answer it kept from an earlier term).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "master/pool_metadata.h"

namespace kvpool::master {

class ActivePool {
 public:
  // `leading` is asked at every Get (an election's "is my lease certainly alive"); empty
  // means always.
  explicit ActivePool(std::function<bool()> leading = {}) : leading_(std::move(leading)) {}

  // The pool to serve this call with; null while this master does not lead. A call keeps its
  // pool alive until it returns, even if leadership ends meanwhile.
  std::shared_ptr<PoolMetadata> Get() const {
    if (leading_ && !leading_()) return nullptr;
    std::lock_guard lock(mu_);
    return pool_;
  }
  // `term`: the election term the pool serves (0 for a lone master), shown by Stat.
  void Set(std::shared_ptr<PoolMetadata> pool, int64_t term = 0) {
    std::lock_guard lock(mu_);
    pool_ = std::move(pool);
    term_ = term;
  }
  int64_t term() const {
    std::lock_guard lock(mu_);
    return term_;
  }

 private:
  const std::function<bool()> leading_;
  mutable std::mutex mu_;
  std::shared_ptr<PoolMetadata> pool_;  // guarded by mu_
  int64_t term_ = 0;                    // guarded by mu_
};

}  // namespace kvpool::master
