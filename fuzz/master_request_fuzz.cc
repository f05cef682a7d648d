// The master's gRPC requests (master/master_service.h), as a client or a store could send them:
// the input is a sequence of requests, each a type byte, a 16-bit little-endian length and that
// many bytes of the request message (protobuf). Whatever parses is handed to the MasterService
// handler, against a fresh pool per input that has two segments mounted, so puts, gets and
// removals reach real placements. The type byte also picks "time passes": the pool's clock moves
// on and maintenance runs (put timeouts, ended leases, silent stores, eviction). Segment ids
// start at the wall clock, which no input can know: in UnmountSegment, Heartbeat and PullIndex
// an id below 16 names the n-th mounted segment, and PullIndex's journal id 1 its journal.
// Checked: every handler answers gRPC OK; every batch reply has one result per key; a placement
// or a lookup lies inside a segment the reply names (a lookup of an object on SSD: one replica,
// on a segment the reply names, its offset being into that store's tier file); a lookup reply
// reads back (proto/lookup_reply.h); the pool never holds more than its capacity.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/server_context.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "common/clock.h"
#include "master/active_pool.h"
#include "master/master_service.h"
#include "master/pool_metadata.h"
#include "master/rpc_metrics.h"
#include "proto/lookup_reply.h"

using namespace kvpool;
using namespace kvpool::master;

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

// Small enough that a few puts fill it and eviction runs; no call waits for a store.
PoolOptions FuzzPoolOptions() {
  PoolOptions o;
  o.shards = 4;
  o.max_key_bytes = 256;
  o.default_lease_ms = 1000;
  o.max_lease_ms = 5000;
  o.put_timeout_ms = 2000;
  o.heartbeat_ttl_ms = 3000;
  o.index_sync_timeout_ms = 0;  // no store confirms journals here: such keys fail at once
  return o;
}

// A mounted segment as a reply names it: id -> size.
using Segments = std::unordered_map<uint64_t, uint64_t>;

Segments Named(const google::protobuf::RepeatedPtrField<proto::SegmentEndpoint>& endpoints) {
  Segments out;
  for (const auto& e : endpoints) out[e.segment_id()] = e.size();
  return out;
}

// [offset, offset + length) inside a segment the reply named.
void RequireInside(const Segments& named, uint64_t segment_id, uint64_t offset, uint64_t length) {
  auto it = named.find(segment_id);
  Require(it != named.end());
  Require(offset <= it->second && length <= it->second - offset);
}

struct Master {
  ManualClock clock;
  std::shared_ptr<PoolMetadata> pool = std::make_shared<PoolMetadata>(FuzzPoolOptions(), &clock);
  ActivePool active;
  RpcMetrics metrics;
  MasterService service{&active, &metrics, {3, "fuzz-master"}, std::nullopt, std::chrono::milliseconds(0)};
  grpc::ServerContext context;

  Master() {
    active.Set(pool, 7);
    for (uint64_t size : {uint64_t{64} << 10, uint64_t{16} << 10}) {
      SegmentInfo info;
      info.store_id = "fuzz-store";
      info.host_id = "fuzz-host";
      info.tcp_address = "127.0.0.1:1";
      info.size = size;
      Require(pool->MountSegment(std::move(info)).ok());
    }
  }

  template <typename Request, typename Reply, typename Handler>
  bool Call(const uint8_t* data, size_t size, Handler handler, Request* request, Reply* reply) {
    if (!request->ParseFromArray(data, static_cast<int>(size))) return false;
    Require((service.*handler)(&context, request, reply).ok());
    return true;
  }

  void Serve(uint8_t type, const uint8_t* data, size_t size);

  // The id of the `id`-th mounted segment, for an id below 16 (see the top).
  uint64_t SegmentId(uint64_t id) const {
    if (id >= 16) return id;
    const PoolStats stats = pool->Stat();
    return id < stats.segments.size() ? stats.segments[id].info.id : id;
  }
};

void Master::Serve(uint8_t type, const uint8_t* data, size_t size) {
  const PoolOptions& options = pool->options();
  switch (type % 14) {
    case 0: {
      proto::MountSegmentRequest rq;
      proto::MountSegmentReply rs;
      if (!Call(data, size, &MasterService::MountSegment, &rq, &rs)) return;
      Require(rs.heartbeat_ttl_ms() == options.heartbeat_ttl_ms && rs.max_lease_ms() == options.max_lease_ms);
      Require((rs.code() == proto::OK) == (rs.segment_id() != 0));
      return;
    }
    case 1: {
      proto::UnmountSegmentRequest rq;
      proto::UnmountSegmentReply rs;
      if (!rq.ParseFromArray(data, static_cast<int>(size))) return;
      rq.set_segment_id(SegmentId(rq.segment_id()));
      Require(service.UnmountSegment(&context, &rq, &rs).ok());
      return;
    }
    case 2: {
      proto::HeartbeatRequest rq;
      proto::HeartbeatReply rs;
      if (!rq.ParseFromArray(data, static_cast<int>(size))) return;
      for (uint64_t& id : *rq.mutable_segment_ids()) id = SegmentId(id);
      Require(service.Heartbeat(&context, &rq, &rs).ok());
      // Only ids the store named come back as unknown.
      for (uint64_t id : rs.unknown_segment_ids()) {
        Require(std::find(rq.segment_ids().begin(), rq.segment_ids().end(), id) != rq.segment_ids().end());
      }
      return;
    }
    case 3: {
      proto::PullIndexRequest rq;
      proto::PullIndexReply rs;
      if (!rq.ParseFromArray(data, static_cast<int>(size))) return;
      rq.set_segment_id(SegmentId(rq.segment_id()));
      auto segment = pool->FindSegment(rq.segment_id());
      if (rq.journal_id() == 1 && segment && segment->journal()) rq.set_journal_id(segment->journal()->id());
      Require(service.PullIndex(&context, &rq, &rs).ok());
      Require(rs.code() == proto::OK || rs.code() == proto::STALE);
      return;
    }
    case 4: {
      proto::BatchPutStartRequest rq;
      proto::BatchPutStartReply rs;
      if (!Call(data, size, &MasterService::BatchPutStart, &rq, &rs)) return;
      Require(rs.results_size() == rq.items_size() && rs.put_timeout_ms() == options.put_timeout_ms);
      const Segments named = Named(rs.segments());
      const int copies = static_cast<int>(std::max<uint32_t>(1, rq.options().replicas()));
      for (int i = 0; i < rs.results_size(); ++i) {
        const proto::PutStartResult& r = rs.results(i);
        if (r.code() != proto::OK) {
          Require(r.replicas_size() == 0);
          continue;
        }
        Require(r.replicas_size() == copies);
        for (const proto::Replica& replica : r.replicas()) {
          Require(replica.length() == rq.items(i).length() && replica.offset() % options.alignment == 0);
          RequireInside(named, replica.segment_id(), replica.offset(), replica.length());
        }
      }
      return;
    }
    case 5:
    case 6:
    case 7: {
      proto::BatchKeysRequest rq;
      proto::BatchKeysReply rs;
      auto handler = type % 14 == 5 ? &MasterService::BatchPutEnd
                     : type % 14 == 6 ? &MasterService::BatchPutRevoke
                                      : &MasterService::BatchRemove;
      if (!Call(data, size, handler, &rq, &rs)) return;
      Require(rs.results_size() == rq.keys_size());
      return;
    }
    case 8: {
      proto::BatchGetReplicasRequest rq;
      proto::BatchGetReplicasReply rs;
      if (!Call(data, size, &MasterService::BatchGetReplicas, &rq, &rs)) return;
      auto entries = ReadLookupReply(rs, static_cast<size_t>(rq.keys_size()));
      Require(entries.ok());
      Require(rs.lease_ms() > 0 && rs.lease_ms() <= options.max_lease_ms);
      const Segments named = Named(rs.segments());
      for (const LookupEntry& e : *entries) {
        if (e.code != proto::OK) continue;
        Require(e.replicas() >= 1);
        if (e.on_ssd) {
          Require(e.replicas() == 1 && named.count(e.segment_id(0)) == 1);
          continue;
        }
        for (size_t r = 0; r < e.replicas(); ++r) RequireInside(named, e.segment_id(r), e.offset(r), e.length);
      }
      return;
    }
    case 12: {
      proto::BatchRetainRequest rq;
      proto::BatchKeysReply rs;
      if (!Call(data, size, &MasterService::BatchRetain, &rq, &rs)) return;
      Require(rs.results_size() == rq.keys_size());
      return;
    }
    case 9: {
      proto::BatchKeysRequest rq;
      proto::BatchExistsReply rs;
      if (!Call(data, size, &MasterService::BatchExists, &rq, &rs)) return;
      Require(rs.exists().size() == static_cast<size_t>(rq.keys_size()));
      for (char flag : rs.exists()) Require(flag == 0 || flag == 1);
      return;
    }
    case 10: {
      proto::StatRequest rq;
      proto::StatReply rs;
      if (!Call(data, size, &MasterService::Stat, &rq, &rs)) return;
      Require(rs.term() == 7);
      return;
    }
    case 11: {
      proto::DescribeRequest rq;
      proto::DescribeReply rs;
      if (!Call(data, size, &MasterService::Describe, &rq, &rs)) return;
      Require(rs.part() == 3 && rs.master_id() == "fuzz-master");
      return;
    }
    default: {  // time passes: the first two bytes are milliseconds
      clock.AdvanceMs(size >= 2 ? data[0] | (data[1] << 8) : 100);
      pool->RunMaintenance();
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::warn);   // rejoins log a line each
  google::protobuf::SetLogHandler(nullptr);  // and protobuf one per key that is not UTF-8
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Master master;
  for (size_t at = 0; at + 3 <= size;) {
    const uint8_t type = data[at];
    const size_t length = std::min<size_t>(data[at + 1] | (data[at + 2] << 8), size - at - 3);
    master.Serve(type, data + at + 3, length);
    at += 3 + length;
  }
  // Capacity is never exceeded (architecture.md, invariant 4), whatever was asked.
  const PoolStats stats = master.pool->Stat();
  Require(stats.used_bytes <= stats.capacity_bytes);
  for (const SegmentStats& s : stats.segments) Require(s.used_bytes <= s.info.size);
  return 0;
}
