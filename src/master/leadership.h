// Leadership: one master's place in its part's etcd election (etcd/part_leader.h).
//
// A master campaigns with its gRPC address under an etcd lease it keeps alive. It is a standby
// until it wins, then leads while its lease is *certainly* alive: the lease was renewed at
// time T with ttl L, so etcd keeps it until at least T + L, and the master stops leading at
// T + 0.9 L unless a later renewal came back. A process that was paused past that stops
// leading the moment it runs again, before any renewal: leading() reads the clock. A lease
// etcd says has expired ends the term for good (`deposed`); the master then campaigns again,
// as a standby with nothing kept from the old term.
//
// Thread-safe. Two threads: one renews the lease, one campaigns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"
#include "etcd/etcd_client.h"

namespace kvpool::master {

struct LeadershipOptions {
  std::string etcd;       // "HOST:PORT[,HOST:PORT...]"
  uint32_t part = 0;      // the election: etcd::PartElection(part)
  std::string advertise;  // what clients and stores are sent to: this master's gRPC HOST:PORT
  std::chrono::seconds ttl{2};
};

class Leadership {
 public:
  struct Events {
    // Called on the campaign thread when this master has won, before leading() turns true:
    // make ready what the new term serves with.
    std::function<void(int64_t term)> elected;
    // Called when a term ended for good (etcd dropped the lease, or Resign), after leading()
    // turned false: drop what the term served with.
    std::function<void(int64_t term)> deposed;
  };

  // Checks the endpoints and starts campaigning. Fails only for malformed options; an etcd
  // that cannot be reached yet is retried in the background.
  static Result<std::unique_ptr<Leadership>> Start(const LeadershipOptions& options, Events events);
  // Stops campaigning and revokes the lease, so a standby leads at once.
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  bool leading() const;
  int64_t term() const { return term_.load(); }  // of the latest win; 0 before any
  // Wins that took the part over from another master (not the first election of the part).
  uint64_t failovers() const { return failovers_.load(); }
  uint64_t elections_won() const { return elections_won_.load(); }
  // The etcd it campaigns in (thread-safe), for the master's other etcd reads.
  etcd::EtcdClient& etcd() const { return *etcd_; }

  // Graceful handover: stops leading, resigns so the next standby leads at once, and campaigns
  // no more. Returns once etcd has the resignation (or it could not be reached).
  Status Resign();

 private:
  Leadership(const LeadershipOptions& options, Events events, std::unique_ptr<etcd::EtcdClient> etcd);
  void RenewLoop();
  void CampaignLoop();
  // Ends the current term (if any) and forgets the lease, so both loops start over.
  void LoseLease(const char* why);
  // Waits up to `pause` or until Stop/Resign; false when the loops must end.
  bool Pause(std::chrono::milliseconds pause);
  int64_t SteadyNowNs() const;

  const LeadershipOptions options_;
  const Events events_;
  const std::unique_ptr<etcd::EtcdClient> etcd_;
  const std::string election_;

  std::atomic<bool> leading_{false};
  std::atomic<int64_t> lease_valid_until_ns_{0};  // steady clock; the lease certainly lives until then
  std::atomic<int64_t> term_{0};
  std::atomic<uint64_t> failovers_{0}, elections_won_{0};

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                   // guarded by mu_; set by Resign
  bool resigned_ = false;                   // guarded by mu_: Resign ran (it runs once)
  int64_t lease_ = 0;                       // guarded by mu_; 0 = none yet / lost
  uint64_t lease_generation_ = 0;           // guarded by mu_; bumps when a lease is lost
  std::optional<etcd::LeaderKey> won_;      // guarded by mu_
  std::shared_ptr<etcd::Canceller> campaign_cancel_;  // guarded by mu_

  std::thread renew_thread_, campaign_thread_;
};

}  // namespace kvpool::master
