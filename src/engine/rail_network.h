// RailNetwork: the NICs between the servers of an emulated deployment, in emulated time.
//
// Every server has `nics` NICs, one per GPU (the published cluster: 8 x 400 Gb/s); NIC i of
// every server is on rail i mod rails, so GPU i of every engine reaches GPU i of any other
// over one rail. A transfer from (server A, NIC a) to (server B, NIC b) uses NIC a outbound
// and NIC b inbound, each carrying `bytes_per_s` per direction. Transfers share a NIC first
// come, first served:
// one issued while the link is busy starts when the traffic already on it is through. That
// keeps the rail's total throughput exact and makes a burst pay its queueing, without a
// fluid model's bookkeeping. Transfers within one server never touch a rail.
// Single-threaded (the event loop); times are emulated seconds.
#pragma once

#include <cstdint>
#include <vector>

namespace kvpool::engine {

struct RailCounters {
  uint64_t transfers = 0;  // that crossed between servers
  double bytes = 0;        // reference (published-model) bytes that crossed between servers
  double queued_s = 0;     // total time transfers waited for a busy NIC
};

class RailNetwork {
 public:
  // bytes_per_s <= 0: unlimited (every cross-server transfer takes no time).
  RailNetwork(int servers, int nics, double bytes_per_s);

  // Sends `bytes` from NIC `from_nic` of server `from` to NIC `to_nic` of server `to`, issued
  // at `now`; returns when the last byte arrives (`now` when from == to or bytes == 0).
  // REQUIRES: servers and NICs in range.
  double Transfer(int from, int from_nic, int to, int to_nic, double bytes, double now);

  int servers() const { return servers_; }
  int nics() const { return nics_; }
  const RailCounters& counters() const { return counters_; }

 private:
  const int servers_;
  const int nics_;
  const double bytes_per_s_;
  std::vector<double> out_free_at_;
  std::vector<double> in_free_at_;
  RailCounters counters_;
};

}  // namespace kvpool::engine
