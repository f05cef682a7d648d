// TakeoverGate: when a master that has just won its part's election starts answering clients.
//
// A won term starts with an empty pool that the stores rebuild as they rejoin. A client
// answered before its key's store has rejoined would be told the key is missing. So the gate
// stays closed (clients get UNAVAILABLE and retry) until every store registered in etcd
// (etcd/store_registry.h) has joined this term — or until the deadline, for a store that never
// comes back. A store that died keeps its registration only until its etcd lease runs out, and
// the registry is listed again while the gate is closed, so a dead store holds clients up for
// its registration's ttl, not for the whole deadline. Once open, the gate stays open for the term.
//
// Thread-safe; Open() is one atomic load once the gate has opened.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace kvpool::master {

class TakeoverGate {
 public:
  using Clock = std::chrono::steady_clock;

  // `who`: how the log names this master ("master of part 0").
  explicit TakeoverGate(std::string who) : who_(std::move(who)) {}

  // A new term: clients wait until the registered stores have joined, at most until `deadline`.
  void Close(Clock::time_point deadline);
  // The stores registered in etcd now.
  void Expect(std::set<std::string> stores);
  // A store's mount or rejoin in this term has completed.
  void Joined(const std::string& store_id);

  // May clients be answered? Opens the gate for good once they may.
  bool Open();
  // Whether clients are still held back.
  bool closed() const { return !open_.load(); }

 private:
  // Logs why the gate opened. REQUIRES: mu_ held.
  void OpenLocked(const std::string& why);

  const std::string who_;
  std::atomic<bool> open_{true};
  std::mutex mu_;
  Clock::time_point closed_at_;            // guarded by mu_
  Clock::time_point deadline_;             // guarded by mu_
  bool listed_ = false;                    // guarded by mu_: Expect() ran since Close()
  std::set<std::string> expected_;         // guarded by mu_
  std::set<std::string> joined_;           // guarded by mu_
};

}  // namespace kvpool::master
