#include "client/client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "client/master_directory.h"
#include "common/checksum.h"
#include "client/part_calls.h"
#include "proto/lookup_reply.h"
#include "proto/status_conversion.h"
#include "proto/master.grpc.pb.h"

namespace kvpool::client {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::milliseconds;

SteadyTime Now() { return std::chrono::steady_clock::now(); }

// How soon a call that found its part's master gone asks etcd again for a new one.
constexpr milliseconds kLeaderRecheck{100};

transfer::SegmentEndpoint ToEndpoint(const proto::SegmentEndpoint& p) {
  transfer::SegmentEndpoint e;
  e.segment_id = p.segment_id();
  e.store_id = p.store_id();
  e.host_id = p.host_id();
  e.tcp_address = p.tcp_address();
  e.shm_socket = p.shm_socket();
  e.size = p.size();
  return e;
}

// A failed write whose bytes may still be in flight to the store: its space must not be
// handed out again before the master's put timeout, so it is left for the master to reclaim
// instead of revoked (architecture invariant 2).
bool MayStillBeWriting(const Status& s) {
  return s.code() == StatusCode::kTimeout || s.code() == StatusCode::kUnavailable;
}

// Segment ids are numbered by each part's master on its own, so the transfer engine, which
// serves every part, knows segment `id` of part `p` as (p << 48) | id.
constexpr int kPartShift = 48;
uint64_t EngineSegmentId(uint32_t part, uint64_t id) { return (uint64_t{part} << kPartShift) | id; }

// The transfer engine proves the same secret as the master calls.
transfer::TransferOptions TransferOptionsOf(const ClientOptions& options) {
  transfer::TransferOptions transfer = options.transfer;
  transfer.secret = options.credentials.secret;
  return transfer;
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::unique_ptr<MasterDirectory> masters;  // each part's master
  transfer::TransferEngine engine;

  std::atomic<uint64_t> checksum_mismatches{0};

  std::mutex segments_mu;

  HelperPool checksum_pool;

  explicit Impl(const ClientOptions& o)
      : options(o), engine(TransferOptionsOf(o)), checksum_pool(std::max(0, o.checksum_threads - 1)) {}

  std::string Address(uint32_t part) const { return masters->Address(part); }

  Status RpcError(const grpc::Status& s, const char* method, uint32_t part) const {
    return FromGrpcStatus(s, method, Address(part));
  }

  // Runs the calls (one per part, concurrently) within rpc_timeout. In a pool elected in etcd,
  // a call that came back UNAVAILABLE (its leader died, or a standby answered) is sent again
  // to whichever master etcd names next, until the timeout: a failover costs a call time, not
  // an error.
  template <class Call, class Prepare>
  void Run(std::vector<Call>& calls, Prepare prepare, bool wait_for_ready = false) const {
    const SteadyTime deadline = Now() + options.rpc_timeout;
    RunPartCalls(masters->Stubs(), calls, PartCallOptions{options.rpc_timeout, wait_for_ready}, prepare);
    while (masters->follows_leaders()) {
      std::vector<size_t> failed;
      for (size_t i = 0; i < calls.size(); ++i) {
        if (calls[i].status.error_code() == grpc::StatusCode::UNAVAILABLE) failed.push_back(i);
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Now());
      if (failed.empty() || left <= milliseconds(0)) return;
      bool moved = false;
      for (size_t i : failed) moved |= masters->Refresh(calls[i].part, left);
      // etcd still names the failed master until its lease ends: ask again shortly.
      if (!moved) std::this_thread::sleep_for(std::min(left, kLeaderRecheck));
      const auto remaining = std::chrono::duration_cast<milliseconds>(deadline - Now());
      if (remaining <= milliseconds(0)) return;  // the failed calls keep their UNAVAILABLE
      std::vector<Call> again;
      for (size_t i : failed) {
        again.push_back(std::move(calls[i]));
        again.back().reply.Clear();
        again.back().status = grpc::Status();
      }
      RunPartCalls(masters->Stubs(), again, PartCallOptions{remaining, wait_for_ready}, prepare);
      for (size_t j = 0; j < failed.size(); ++j) calls[failed[j]] = std::move(again[j]);
    }
  }

  // One call per part, in part order.
  template <class Call>
  std::vector<Call> CallsToEveryPart() const {
    std::vector<Call> calls(masters->size());
    for (uint32_t p = 0; p < calls.size(); ++p) calls[p].part = p;
    return calls;
  }

  // One call per part that holds one of `keys`, carrying that part's keys, in part order.
  template <class Call>
  std::vector<Call> CallsByPart(std::span<const std::string> keys) const {
    std::vector<Call> calls = CallsToEveryPart<Call>();
    for (size_t i = 0; i < keys.size(); ++i) calls[options.pool.PartOf(keys[i])].keys.push_back(i);
    std::erase_if(calls, [](const Call& c) { return c.keys.empty(); });
    return calls;
  }

  // CallsByPart, with each call's request carrying its keys (requests with a `keys` field).
  template <class Call>
  std::vector<Call> KeyCallsByPart(std::span<const std::string> keys) const {
    std::vector<Call> calls = CallsByPart<Call>(keys);
    for (Call& c : calls) {
      c.request.mutable_keys()->Reserve(static_cast<int>(c.keys.size()));
      for (size_t i : c.keys) c.request.add_keys(keys[i]);
    }
    return calls;
  }

  // One status per key from calls answered with a BatchKeysReply (`method` names the call in
  // errors): the part's error for its keys when the call failed.
  template <class Call>
  std::vector<Status> KeyResults(const std::vector<Call>& calls, std::span<const std::string> keys,
                                 const char* method) const {
    std::vector<Status> out(keys.size());
    for (const Call& c : calls) {
      for (size_t j = 0; j < c.keys.size(); ++j) {
        const size_t i = c.keys[j];
        if (!c.status.ok()) {
          out[i] = RpcError(c.status, method, c.part);
        } else if (c.reply.results_size() != static_cast<int>(c.keys.size())) {
          out[i] = Internal(fmt::format("master answered {} with a wrong number of results", method));
        } else {
          const proto::KeyResult& r = c.reply.results(static_cast<int>(j));
          out[i] = FromProtoCode(r.code(), r.message(), keys[i]);
        }
      }
    }
    return out;
  }

  // The master's BatchRetain to every part holding one of `keys` (retain_ms 0: release).
  std::vector<Status> BatchRetain(std::span<const std::string> keys, uint64_t retain_ms,
                                  std::optional<uint64_t> reuse_in_ms) {
    using Call = PartCall<proto::BatchRetainRequest, proto::BatchKeysReply>;
    std::vector<Call> calls = KeyCallsByPart<Call>(keys);
    for (Call& c : calls) {
      c.request.set_retain_ms(retain_ms);
      if (reuse_in_ms) c.request.set_reuse_in_ms(*reuse_in_ms);
    }
    Run(calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncBatchRetain(ctx, c.request, cq); });
    return KeyResults(calls, keys, "BatchRetain");
  }

  // Tells the engine about a part's segments (it keeps what it knows, and reopens a segment
  // whose endpoint changed or whose route fell back: transfer_engine.h). Serialized, so two
  // lookups never open the same new segment twice.
  void OpenSegments(uint32_t part, const google::protobuf::RepeatedPtrField<proto::SegmentEndpoint>& endpoints) {
    std::lock_guard lock(segments_mu);
    for (const auto& p : endpoints) {
      if (p.segment_id() >> kPartShift) continue;  // cannot be named; its keys fail STALE
      transfer::SegmentEndpoint e = ToEndpoint(p);
      e.segment_id = EngineSegmentId(part, p.segment_id());
      e.store_segment_id = p.segment_id();
      Status opened = engine.OpenSegment(e);
      (void)opened;  // its requests fail STALE, naming why, until a later reply opens it
    }
  }

  // One BatchGetReplicas round trip per part, concurrently: lengths, replicas (same-host
  // first) and read leases.
  LookupResult Lookup(std::span<const std::string> keys) {
    LookupResult out;
    out.lengths_.assign(keys.size(), Result<uint64_t>(Internal("not looked up")));
    out.checksums_.assign(keys.size(), 0);
    out.replicas_.resize(keys.size());
    out.lease_deadline_ = Now();
    using Call = PartCall<proto::BatchGetReplicasRequest, proto::BatchGetReplicasReply>;
    std::vector<Call> calls = KeyCallsByPart<Call>(keys);
    for (Call& c : calls) c.request.set_lease_ms(static_cast<uint64_t>(std::max<int64_t>(0, options.lease.count())));
    Run(
        calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncBatchGetReplicas(ctx, c.request, cq); });
    std::optional<SteadyTime> lease_end;
    for (const Call& c : calls) {
      Result<std::vector<LookupEntry>> entries =
          c.status.ok() ? ReadLookupReply(c.reply, c.keys.size())
                        : Result<std::vector<LookupEntry>>(RpcError(c.status, "BatchGetReplicas", c.part));
      if (!entries.ok()) {
        for (size_t i : c.keys) out.lengths_[i] = entries.status();
        continue;
      }
      OpenSegments(c.part, c.reply.segments());
      // Invariant 1: bytes read after the lease ends may have been overwritten. The lookup's
      // deadline is the earliest of its parts'.
      const SteadyTime part_lease_end = c.sent + milliseconds(c.reply.lease_ms());
      lease_end = lease_end ? std::min(*lease_end, part_lease_end) : part_lease_end;
      for (size_t j = 0; j < c.keys.size(); ++j) {
        const size_t i = c.keys[j];
        const LookupEntry& e = (*entries)[j];
        if (e.code != proto::OK) {
          out.lengths_[i] = FromProtoCode(e.code, std::string(e.message), keys[i]);
          if (e.evicted_ms_ago > 0) {
            out.evicted_ms_ago_.resize(keys.size(), 0);
            out.evicted_ms_ago_[i] = e.evicted_ms_ago;
          }
          continue;
        }
        out.lengths_[i] = e.length;
        out.checksums_[i] = e.checksum;
        auto& replicas = out.replicas_[i];
        replicas.reserve(e.replicas());
        for (size_t r = 0; r < e.replicas(); ++r) {
          replicas.push_back({EngineSegmentId(c.part, e.segment_id(r)), e.offset(r), e.grant(r), e.on_ssd});
        }
        // Same-host replicas first: they are read by memcpy, not over a socket.
        std::stable_partition(replicas.begin(), replicas.end(), [&](const LookupResult::Replica& r) {
          return engine.TransportFor(r.segment_id) == "shm";
        });
      }
    }
    if (lease_end) out.lease_deadline_ = *lease_end;
    return out;
  }

  // Runs `requests`: the segment reads waited for until `deadline`, the tier reads until
  // `tier_deadline` (two batches in flight at once). One status per request, in order.
  std::vector<Status> TransferWithDeadlines(std::span<const transfer::TransferRequest> requests, SteadyTime deadline,
                                            SteadyTime tier_deadline) {
    std::vector<transfer::TransferRequest> of[2];  // [0] segment reads, [1] tier reads
    std::vector<size_t> at[2];
    for (size_t q = 0; q < requests.size(); ++q) {
      const int k = requests[q].from_tier ? 1 : 0;
      of[k].push_back(requests[q]);
      at[k].push_back(q);
    }
    std::unique_ptr<transfer::TransferBatch> batches[2];
    for (int k = 0; k < 2; ++k) {
      if (!of[k].empty()) batches[k] = engine.Submit(of[k]);
    }
    std::vector<Status> out(requests.size(), Internal("transfer engine lost a result"));
    for (int k = 0; k < 2; ++k) {
      if (!batches[k]) continue;
      (void)batches[k]->Wait(k == 0 ? deadline : tier_deadline);
      const std::vector<Status>& results = batches[k]->results();
      for (size_t n = 0; n < at[k].size() && n < results.size(); ++n) out[at[k][n]] = results[n];
    }
    return out;
  }

  // Reads lookup entries `indices` into the buffers `buffer_for(j, length)` returns for the
  // j-th index (an error status rejects that entry). A replica that fails (store gone, stale,
  // bytes that do not match the checksum) is retried on the entry's next replica while the
  // lease lasts.
  std::vector<Result<uint64_t>> Read(
      const LookupResult& lookup, std::span<const size_t> indices, ChecksumCheck check,
      const std::function<Result<ValueBuffer>(size_t j, uint64_t length)>& buffer_for) {
    const bool verify = check == ChecksumCheck::kBeforeAnswer;
    std::vector<Result<uint64_t>> results(indices.size(), Result<uint64_t>(Internal("not attempted")));
    const SteadyTime lease_end = lookup.lease_deadline();
    // Reads of segments end within their lease (invariant 1). Reads of SSD tiers hold no lease
    // (the store does not pin the slot; the checksum catches a reused one): the timeout only.
    const SteadyTime tier_deadline = Now() + options.transfer_timeout;
    const SteadyTime deadline = std::min(lease_end, tier_deadline);
    struct Pending {
      size_t j;  // position in `indices`
      size_t i;  // lookup entry
      ValueBuffer buffer;
      const std::vector<LookupResult::Replica>* replicas;
    };
    std::vector<Pending> pending;
    for (size_t j = 0; j < indices.size(); ++j) {
      const size_t i = indices[j];
      if (i >= lookup.size()) {
        results[j] = InvalidArgument("lookup index " + std::to_string(i) + " is out of range");
        continue;
      }
      if (!lookup.length(i).ok()) {
        results[j] = lookup.length(i).status();
        continue;
      }
      Result<ValueBuffer> buffer = buffer_for(j, lookup.length(i).value());
      if (!buffer.ok()) {
        results[j] = buffer.status();
        continue;
      }
      pending.push_back({j, i, *buffer, &lookup.replicas_[i]});
    }

    for (size_t attempt = 0; !pending.empty(); ++attempt) {
      std::erase_if(pending, [&](const Pending& p) {
        const bool tier = (*p.replicas)[attempt].on_ssd;
        if (Now() < (tier ? tier_deadline : deadline)) return false;
        results[p.j] = Timeout(tier ? "the transfer timeout passed before the read could start"
                                    : "lease ended before the read could start");
        return true;
      });
      if (pending.empty()) break;
      // The transports hash what they read as it lands (a value read once, from cache).
      std::vector<uint64_t> checksums(pending.size(), 0);
      std::vector<transfer::TransferRequest> requests;
      requests.reserve(pending.size());
      for (size_t q = 0; q < pending.size(); ++q) {
        const Pending& p = pending[q];
        const LookupResult::Replica& r = (*p.replicas)[attempt];
        const bool hash = (verify || r.on_ssd) && p.buffer.size() <= transfer::kMaxHashedReadBytes;
        requests.push_back({transfer::OpKind::kRead, p.buffer.data(), r.segment_id, r.offset, p.buffer.size(), r.grant,
                            hash ? &checksums[q] : nullptr, r.on_ssd});
      }
      // A value on SSD is checked whatever the caller asked: its slot is not pinned.
      const auto checked = [&](size_t q) { return verify || requests[q].from_tier; };
      const std::vector<Status> per_request = TransferWithDeadlines(requests, deadline, tier_deadline);
      const bool lease_over = Now() > lease_end;
      // Reads that finished after their lease may hold overwritten bytes; tier reads have none.
      const auto late = [&](size_t q) { return lease_over && !requests[q].from_tier; };
      // Values too long to hash as they land are hashed now, on the checksum pool's threads.
      {
        std::vector<std::span<const std::byte>> values;
        std::vector<size_t> read;
        for (size_t q = 0; q < requests.size(); ++q) {
          if (!per_request[q].ok() || late(q) || !checked(q) || requests[q].checksum != nullptr) continue;
          values.push_back(pending[q].buffer);
          read.push_back(q);
        }
        std::vector<uint64_t> sums(values.size());
        ChecksumAll(checksum_pool, values, sums);
        for (size_t k = 0; k < read.size(); ++k) checksums[read[k]] = sums[k];
      }
      std::vector<Pending> retry;
      for (size_t q = 0; q < requests.size(); ++q) {
        const Pending& p = pending[q];
        Status s = per_request[q];
        if (s.ok() && late(q)) s = Timeout("read finished after its lease ended");
        if (s.ok() && checked(q) && checksums[q] != lookup.checksums_[p.i]) {
          checksum_mismatches.fetch_add(1, std::memory_order_relaxed);
          s = Corrupt(fmt::format("the bytes read from {} {} at offset {} do not match the value's checksum",
                                  requests[q].from_tier ? "the SSD tier of segment" : "segment",
                                  requests[q].segment_id & ((uint64_t{1} << kPartShift) - 1), requests[q].offset));
        }
        if (s.ok()) {
          results[p.j] = static_cast<uint64_t>(p.buffer.size());
          continue;
        }
        results[p.j] = s;
        if (s.code() != StatusCode::kTimeout && attempt + 1 < p.replicas->size()) retry.push_back(p);
      }
      pending = std::move(retry);
    }
    return results;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  KVPOOL_RETURN_IF_ERROR(options.pool.Validate());
  auto impl = std::make_unique<Impl>(options);
  auto masters = MasterDirectory::Create(options.pool, options.rpc_timeout, options.credentials);
  if (!masters.ok()) return masters.status();
  impl->masters = *std::move(masters);

  using Call = PartCall<proto::DescribeRequest, proto::DescribeReply>;
  std::vector<Call> calls = impl->CallsToEveryPart<Call>();
  impl->Run(
      calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncDescribe(ctx, c.request, cq); },
      // A fixed master may still be starting: wait for it. An elected one was just named by
      // etcd; if it is gone, fail fast and ask etcd again (Run).
      /*wait_for_ready=*/!impl->masters->follows_leaders());
  const bool single = options.pool.size() == 1;
  const size_t answered = std::count_if(calls.begin(), calls.end(), [](const Call& c) { return c.status.ok(); });
  for (const Call& c : calls) {
    if (c.status.ok() || (options.allow_unreachable_parts && answered > 0)) continue;
    if (c.status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Unauthenticated(fmt::format("{}: {}", impl->Address(c.part), c.status.error_message()));
    }
    return Unavailable(fmt::format(
        "cannot reach {} at {} within {} ms (is `kvpool master{}` or `kvpool serve` running there?): {}",
        single ? "the kvpool master" : fmt::format("the master of part {}", c.part), impl->Address(c.part),
        options.rpc_timeout.count(), single ? "" : fmt::format(" --part {}", c.part), c.status.error_message()));
  }
  std::unordered_map<std::string, uint32_t> part_of_master;
  for (const Call& c : calls) {
    if (!c.status.ok()) continue;
    auto [it, fresh] = part_of_master.emplace(c.reply.master_id(), c.part);
    if (!fresh) {
      return InvalidArgument(fmt::format("part {} ({}) and part {} ({}) are the same master", it->second,
                                         impl->Address(it->second), c.part, impl->Address(c.part)));
    }
  }
  for (const Call& c : calls) {
    if (c.status.ok() && c.reply.part() != c.part) {
      return InvalidArgument(fmt::format("{} is listed as part {} but its master serves part {} (check the pool list "
                                         "and the masters' --part)",
                                         impl->Address(c.part), c.part, c.reply.part()));
    }
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::Put(std::string_view key, ValueView value, const PutOptions& options) {
  const std::string k(key);
  return BatchPut(std::span<const std::string>(&k, 1), std::span<const ValueView>(&value, 1), options)[0];
}

std::vector<Status> Client::BatchPut(std::span<const std::string> keys, std::span<const ValueView> values,
                                     const PutOptions& options, std::span<const std::string> groups) {
  if (keys.size() != values.size()) {
    return std::vector<Status>(keys.size(), InvalidArgument("BatchPut needs one value per key"));
  }
  if (!groups.empty() && groups.size() != keys.size()) {
    return std::vector<Status>(keys.size(), InvalidArgument("BatchPut needs one group per key (or none)"));
  }
  std::vector<Status> results(keys.size());
  if (keys.empty()) return results;

  using StartCall = PartCall<proto::BatchPutStartRequest, proto::BatchPutStartReply>;
  std::vector<StartCall> starts = impl_->CallsByPart<StartCall>(keys);
  for (StartCall& c : starts) {
    c.request.mutable_items()->Reserve(static_cast<int>(c.keys.size()));
    for (size_t i : c.keys) {
      auto* item = c.request.add_items();
      item->set_key(keys[i]);
      item->set_length(values[i].size());
      item->set_checksum(Checksum(values[i]));
      if (!groups.empty()) item->set_group(groups[i]);
    }
    auto* opts = c.request.mutable_options();
    opts->set_replicas(options.replicas ? options.replicas : impl_->options.replicas);
    opts->set_group(options.group);
    opts->set_pin_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, options.pin_ttl.count())));
  }
  impl_->Run(
      starts, [](auto& stub, auto* ctx, StartCall& c, auto* cq) { return stub.PrepareAsyncBatchPutStart(ctx, c.request, cq); });

  // One transfer batch writes every part's replicas at once. Invariant 2: finish well inside
  // every part's put timeout.
  SteadyTime deadline = Now() + impl_->options.transfer_timeout;
  std::vector<bool> started(keys.size(), false);
  std::vector<transfer::TransferRequest> requests;
  std::vector<size_t> owner;
  for (const StartCall& c : starts) {
    if (!c.status.ok() || c.reply.results_size() != static_cast<int>(c.keys.size())) {
      Status err = c.status.ok() ? Internal("master answered BatchPutStart with a wrong number of results")
                                 : impl_->RpcError(c.status, "BatchPutStart", c.part);
      for (size_t i : c.keys) results[i] = err;
      continue;
    }
    impl_->OpenSegments(c.part, c.reply.segments());
    deadline = std::min(deadline, c.sent + milliseconds(c.reply.put_timeout_ms() / 2));
    for (size_t j = 0; j < c.keys.size(); ++j) {
      const size_t i = c.keys[j];
      const proto::PutStartResult& r = c.reply.results(static_cast<int>(j));
      if (r.code() != proto::OK) {
        results[i] = FromProtoCode(r.code(), r.message(), keys[i]);
        continue;
      }
      started[i] = true;
      for (const auto& replica : r.replicas()) {
        AccessGrant grant;
        if (replica.grant().size() == AccessGrant::kWireSize) {
          grant = DecodeGrant(reinterpret_cast<const uint8_t*>(replica.grant().data()));
        }
        requests.push_back({transfer::OpKind::kWrite, const_cast<std::byte*>(values[i].data()),
                            EngineSegmentId(c.part, replica.segment_id()), replica.offset(), replica.length(), grant});
        owner.push_back(i);
      }
    }
  }
  std::vector<Status> per_request;
  if (!requests.empty()) (void)impl_->engine.Transfer(requests, deadline, &per_request);
  for (size_t q = 0; q < requests.size(); ++q) {
    Status s = q < per_request.size() ? per_request[q] : Internal("transfer engine lost a result");
    if (!s.ok() && results[owner[q]].ok()) results[owner[q]] = s;
  }

  // Per part: end the puts whose writes all succeeded, revoke the ones that surely stopped.
  using KeysCall = PartCall<proto::BatchKeysRequest, proto::BatchKeysReply>;
  std::vector<KeysCall> ends, revokes;
  for (const StartCall& c : starts) {
    KeysCall end, revoke;
    end.part = revoke.part = c.part;
    for (size_t i : c.keys) {
      if (!started[i]) continue;
      KeysCall& call = results[i].ok() ? end : revoke;
      if (!results[i].ok() && MayStillBeWriting(results[i])) continue;  // the master's put timeout reclaims it
      call.keys.push_back(i);
      call.request.add_keys(keys[i]);
    }
    if (!end.keys.empty()) ends.push_back(std::move(end));
    if (!revoke.keys.empty()) revokes.push_back(std::move(revoke));
  }
  impl_->Run(
      revokes, [](auto& stub, auto* ctx, KeysCall& c, auto* cq) { return stub.PrepareAsyncBatchPutRevoke(ctx, c.request, cq); });
  impl_->Run(
      ends, [](auto& stub, auto* ctx, KeysCall& c, auto* cq) { return stub.PrepareAsyncBatchPutEnd(ctx, c.request, cq); });
  for (const KeysCall& c : ends) {
    for (size_t j = 0; j < c.keys.size(); ++j) {
      const size_t i = c.keys[j];
      if (!c.status.ok()) {
        results[i] = impl_->RpcError(c.status, "BatchPutEnd", c.part);
      } else if (static_cast<int>(j) >= c.reply.results_size()) {
        results[i] = Internal("master answered BatchPutEnd with too few results");
      } else if (c.reply.results(static_cast<int>(j)).code() != proto::OK) {
        results[i] = FromProtoCode(c.reply.results(static_cast<int>(j)).code(),
                                   c.reply.results(static_cast<int>(j)).message(), keys[i]);
      }
    }
  }
  return results;
}

Result<std::string> Client::Get(std::string_view key) {
  const std::string k(key);
  const LookupResult lookup = impl_->Lookup(std::span<const std::string>(&k, 1));
  std::string value;
  const size_t first = 0;
  auto results = impl_->Read(lookup, std::span<const size_t>(&first, 1), ChecksumCheck::kBeforeAnswer,
                             [&](size_t, uint64_t length) -> Result<ValueBuffer> {
    value.resize(length);
    return ValueBuffer(reinterpret_cast<std::byte*>(value.data()), length);
  });
  if (!results[0].ok()) return results[0].status();
  return value;
}

Result<uint64_t> Client::GetInto(std::string_view key, ValueBuffer buffer) {
  const std::string k(key);
  return BatchGetInto(std::span<const std::string>(&k, 1), std::span<const ValueBuffer>(&buffer, 1))[0];
}

std::vector<Result<uint64_t>> Client::BatchGetInto(std::span<const std::string> keys,
                                                   std::span<const ValueBuffer> buffers) {
  if (keys.size() != buffers.size()) {
    return std::vector<Result<uint64_t>>(keys.size(), InvalidArgument("BatchGetInto needs one buffer per key"));
  }
  const LookupResult lookup = impl_->Lookup(keys);
  std::vector<size_t> all(keys.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return ReadLookedUp(lookup, all, buffers);
}

LookupResult Client::BatchLookup(std::span<const std::string> keys) { return impl_->Lookup(keys); }

std::vector<Result<uint64_t>> Client::ReadLookedUp(const LookupResult& lookup, std::span<const size_t> indices,
                                                   std::span<const ValueBuffer> buffers, ChecksumCheck check) {
  if (indices.size() != buffers.size()) {
    return std::vector<Result<uint64_t>>(indices.size(), InvalidArgument("ReadLookedUp needs one buffer per index"));
  }
  return impl_->Read(lookup, indices, check, [&](size_t j, uint64_t length) -> Result<ValueBuffer> {
    if (buffers[j].size() < length) {
      return InvalidArgument("buffer of " + std::to_string(buffers[j].size()) + " bytes is too small for a value of " +
                             std::to_string(length) + " bytes");
    }
    return buffers[j].first(length);
  });
}

Result<transfer::MappedRange> Client::MapLookedUp(const LookupResult& lookup, size_t index) {
  if (index >= lookup.size()) return InvalidArgument("lookup index " + std::to_string(index) + " is out of range");
  if (!lookup.length(index).ok()) return lookup.length(index).status();
  if (std::chrono::steady_clock::now() >= lookup.lease_deadline()) return Timeout("lease ended before the map");
  Status last = Unavailable("no replica to map");
  for (const LookupResult::Replica& r : lookup.replicas_[index]) {
    if (r.on_ssd) return Unavailable("the value is in its store's SSD tier: read it with ReadLookedUp");
    auto mapped = impl_->engine.MapForRead(r.segment_id, r.offset, lookup.length(index).value());
    if (mapped.ok()) return mapped;
    last = mapped.status();
  }
  return last;
}

Result<bool> Client::Exists(std::string_view key) {
  const std::string k(key);
  auto r = BatchExists(std::span<const std::string>(&k, 1));
  if (!r.ok()) return r.status();
  return static_cast<bool>(r.value()[0]);
}

Result<std::vector<bool>> Client::BatchExists(std::span<const std::string> keys) {
  using Call = PartCall<proto::BatchKeysRequest, proto::BatchExistsReply>;
  std::vector<Call> calls = impl_->KeyCallsByPart<Call>(keys);
  impl_->Run(
      calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncBatchExists(ctx, c.request, cq); });
  std::vector<bool> out(keys.size());
  for (const Call& c : calls) {
    if (!c.status.ok()) return impl_->RpcError(c.status, "BatchExists", c.part);
    if (c.reply.exists().size() != c.keys.size())
      return Internal("master answered BatchExists with a wrong number of results");
    for (size_t j = 0; j < c.keys.size(); ++j) out[c.keys[j]] = c.reply.exists()[j] != 0;
  }
  return out;
}

Status Client::Remove(std::string_view key) {
  const std::string k(key);
  return BatchRemove(std::span<const std::string>(&k, 1))[0];
}

std::vector<Status> Client::BatchRemove(std::span<const std::string> keys) {
  using Call = PartCall<proto::BatchKeysRequest, proto::BatchKeysReply>;
  std::vector<Call> calls = impl_->KeyCallsByPart<Call>(keys);
  impl_->Run(
      calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncBatchRemove(ctx, c.request, cq); });
  return impl_->KeyResults(calls, keys, "BatchRemove");
}

std::vector<Status> Client::Retain(std::span<const std::string> keys, std::chrono::milliseconds ttl,
                                   std::optional<std::chrono::milliseconds> reuse_in) {
  if (ttl.count() <= 0) return std::vector<Status>(keys.size(), InvalidArgument("Retain needs a ttl above 0"));
  if (reuse_in && reuse_in->count() < 0) {
    return std::vector<Status>(keys.size(), InvalidArgument("Retain's expected reuse cannot be in the past"));
  }
  std::optional<uint64_t> reuse_in_ms;
  if (reuse_in) reuse_in_ms = static_cast<uint64_t>(reuse_in->count());
  return impl_->BatchRetain(keys, static_cast<uint64_t>(ttl.count()), reuse_in_ms);
}

std::vector<Status> Client::Release(std::span<const std::string> keys) {
  return impl_->BatchRetain(keys, 0, std::nullopt);
}

void PoolCounters::Add(const PoolCounters& o) {
  objects += o.objects;
  used_bytes += o.used_bytes;
  capacity_bytes += o.capacity_bytes;
  evicted_objects += o.evicted_objects;
  evicted_bytes += o.evicted_bytes;
  hits += o.hits;
  misses += o.misses;
  misses_evicted += o.misses_evicted;
}

size_t PoolStats::unreachable_parts() const {
  return static_cast<size_t>(std::count_if(parts.begin(), parts.end(), [](const PartStats& p) { return !p.status.ok(); }));
}

Result<PoolStats> Client::Stat() {
  using Call = PartCall<proto::StatRequest, proto::StatReply>;
  std::vector<Call> calls = impl_->CallsToEveryPart<Call>();
  impl_->Run(
      calls, [](auto& stub, auto* ctx, Call& c, auto* cq) { return stub.PrepareAsyncStat(ctx, c.request, cq); });
  PoolStats s;
  for (const Call& c : calls) {
    PartStats part;
    part.part = c.part;
    part.master_address = impl_->Address(c.part);
    if (!c.status.ok()) {
      part.status = impl_->RpcError(c.status, "Stat", c.part);
      s.parts.push_back(std::move(part));
      continue;
    }
    const proto::StatReply& r = c.reply;
    part.objects = r.objects();
    part.used_bytes = r.used_bytes();
    part.capacity_bytes = r.capacity_bytes();
    part.evicted_objects = r.evicted_objects();
    part.evicted_bytes = r.evicted_bytes();
    part.hits = r.hits();
    part.misses = r.misses();
    part.misses_evicted = r.misses_evicted();
    part.term = r.term();
    s.Add(part);
    // Opened here too, so the stat says how this client reaches each segment.
    google::protobuf::RepeatedPtrField<proto::SegmentEndpoint> endpoints;
    for (const auto& seg : r.segments()) *endpoints.Add() = seg.segment();
    impl_->OpenSegments(c.part, endpoints);
    for (const auto& seg : r.segments()) {
      s.segments.push_back({c.part, seg.segment().segment_id(), seg.segment().store_id(), seg.segment().host_id(),
                            seg.segment().tcp_address(), seg.segment().size(), seg.used_bytes(), seg.objects(),
                            seg.segment().ssd_capacity_bytes(), seg.ssd_used_bytes(), seg.ssd_objects(),
                            impl_->engine.TransportFor(EngineSegmentId(c.part, seg.segment().segment_id()))});
    }
    s.parts.push_back(std::move(part));
  }
  if (s.unreachable_parts() == s.parts.size()) return s.parts.front().status;
  return s;
}

const PoolParts& Client::pool() const { return impl_->options.pool; }

uint64_t Client::checksum_mismatches() const {
  return impl_->checksum_mismatches.load(std::memory_order_relaxed);
}

Status Client::RegisterBuffer(void* addr, size_t length) { return impl_->engine.RegisterMemory(addr, length); }
Status Client::UnregisterBuffer(void* addr) { return impl_->engine.UnregisterMemory(addr); }
transfer::TransferEngine& Client::transfer_engine() { return impl_->engine; }

}  // namespace kvpool::client
