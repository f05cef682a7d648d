#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "proto/status_conversion.h"
#include "proto/master.grpc.pb.h"

namespace kvpool::client {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::milliseconds;

SteadyTime Now() { return std::chrono::steady_clock::now(); }

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

}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::Master::Stub> stub;
  transfer::TransferEngine engine;

  std::mutex segments_mu;
  std::unordered_map<uint64_t, transfer::SegmentEndpoint> segments;  // what the engine was told

  explicit Impl(const ClientOptions& o) : options(o), engine(o.transfer) {}

  void ConfigureContext(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() + options.rpc_timeout);  // gRPC takes wall-clock deadlines
  }

  Status RpcError(const grpc::Status& s, const char* method) const {
    return FromGrpcStatus(s, method, options.master_address);
  }

  // Tells the engine about segments it has not seen, or whose endpoint changed.
  void OpenSegments(const google::protobuf::RepeatedPtrField<proto::SegmentEndpoint>& endpoints) {
    std::lock_guard lock(segments_mu);
    for (const auto& p : endpoints) {
      transfer::SegmentEndpoint e = ToEndpoint(p);
      auto it = segments.find(e.segment_id);
      if (it != segments.end() && it->second.tcp_address == e.tcp_address &&
          it->second.shm_socket == e.shm_socket && it->second.size == e.size)
        continue;
      if (engine.OpenSegment(e).ok()) segments[e.segment_id] = e;
    }
  }

  // One BatchGetReplicas round trip: lengths, replicas (same-host first) and read leases.
  LookupResult Lookup(std::span<const std::string> keys) {
    LookupResult out;
    out.lengths_.assign(keys.size(), Result<uint64_t>(Internal("not looked up")));
    out.replicas_.resize(keys.size());
    out.lease_deadline_ = Now();
    if (keys.empty()) return out;
    proto::BatchGetReplicasRequest request;
    request.mutable_keys()->Reserve(static_cast<int>(keys.size()));
    for (const auto& k : keys) request.add_keys(k);
    request.set_lease_ms(static_cast<uint64_t>(std::max<int64_t>(0, options.lease.count())));
    proto::BatchGetReplicasReply reply;
    grpc::ClientContext ctx;
    ConfigureContext(ctx);
    const SteadyTime sent = Now();
    grpc::Status rpc = stub->BatchGetReplicas(&ctx, request, &reply);
    if (!rpc.ok() || reply.results_size() != static_cast<int>(keys.size())) {
      Status err = rpc.ok() ? Internal("master answered BatchGetReplicas with a wrong number of results")
                            : RpcError(rpc, "BatchGetReplicas");
      for (auto& r : out.lengths_) r = err;
      return out;
    }
    OpenSegments(reply.segments());
    // Invariant 1: bytes read after the lease ends may have been overwritten.
    out.lease_deadline_ = sent + milliseconds(reply.lease_ms());
    for (size_t i = 0; i < keys.size(); ++i) {
      const proto::GetResult& g = reply.results(static_cast<int>(i));
      if (g.code() != proto::OK) {
        out.lengths_[i] = FromProtoCode(g.code(), g.message(), keys[i]);
        continue;
      }
      if (g.replicas_size() == 0) {
        out.lengths_[i] = Internal("master returned no replica for '" + keys[i] + "'");
        continue;
      }
      out.lengths_[i] = g.length();
      auto& replicas = out.replicas_[i];
      for (const auto& r : g.replicas()) replicas.push_back({r.segment_id(), r.offset()});
      // Same-host replicas first: they are read by memcpy, not over a socket.
      std::stable_partition(replicas.begin(), replicas.end(), [&](const LookupResult::Replica& r) {
        return engine.TransportFor(r.segment_id) == "shm";
      });
    }
    return out;
  }

  // Reads lookup entries `indices` into the buffers `buffer_for(j, length)` returns for the
  // j-th index (an error status rejects that entry). A replica that fails (store gone, stale)
  // is retried on the entry's next replica while the lease lasts.
  std::vector<Result<uint64_t>> Read(
      const LookupResult& lookup, std::span<const size_t> indices,
      const std::function<Result<ValueBuffer>(size_t j, uint64_t length)>& buffer_for) {
    std::vector<Result<uint64_t>> results(indices.size(), Result<uint64_t>(Internal("not attempted")));
    const SteadyTime lease_end = lookup.lease_deadline();
    const SteadyTime deadline = std::min(lease_end, Now() + options.transfer_timeout);
    struct Pending {
      size_t j;  // position in `indices`
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
      pending.push_back({j, *buffer, &lookup.replicas_[i]});
    }

    for (size_t attempt = 0; !pending.empty(); ++attempt) {
      if (Now() >= deadline) {
        for (const Pending& p : pending) results[p.j] = Timeout("lease ended before the read could start");
        break;
      }
      std::vector<transfer::TransferRequest> requests;
      requests.reserve(pending.size());
      for (const Pending& p : pending) {
        const LookupResult::Replica& r = (*p.replicas)[attempt];
        requests.push_back({transfer::OpKind::kRead, p.buffer.data(), r.segment_id, r.offset, p.buffer.size()});
      }
      std::vector<Status> per_request;
      (void)engine.Transfer(requests, deadline, &per_request);
      const bool lease_over = Now() > lease_end;
      std::vector<Pending> retry;
      for (size_t q = 0; q < requests.size(); ++q) {
        const Pending& p = pending[q];
        Status s = q < per_request.size() ? per_request[q] : Internal("transfer engine lost a result");
        if (s.ok() && lease_over) s = Timeout("read finished after its lease ended");
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
  if (options.master_address.empty()) return InvalidArgument("master address is empty (expected HOST:PORT)");
  auto impl = std::make_unique<Impl>(options);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  impl->channel = grpc::CreateCustomChannel(options.master_address, grpc::InsecureChannelCredentials(), args);
  if (!impl->channel->WaitForConnected(std::chrono::system_clock::now() + options.rpc_timeout)) {
    return Unavailable("cannot reach the kvpool master at " + options.master_address + " within " +
                       std::to_string(options.rpc_timeout.count()) +
                       " ms (is `kvpool master` or `kvpool serve` running there?)");
  }
  impl->stub = proto::Master::NewStub(impl->channel);
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

  proto::BatchPutStartRequest start;
  start.mutable_items()->Reserve(static_cast<int>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto* item = start.add_items();
    item->set_key(keys[i]);
    item->set_length(values[i].size());
    if (!groups.empty()) item->set_group(groups[i]);
  }
  auto* opts = start.mutable_options();
  opts->set_replicas(options.replicas ? options.replicas : impl_->options.replicas);
  opts->set_group(options.group);
  opts->set_pin_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, options.pin_ttl.count())));

  proto::BatchPutStartReply started;
  grpc::ClientContext start_ctx;
  impl_->ConfigureContext(start_ctx);
  const SteadyTime sent = Now();
  grpc::Status rpc = impl_->stub->BatchPutStart(&start_ctx, start, &started);
  if (!rpc.ok() || started.results_size() != static_cast<int>(keys.size())) {
    Status err = rpc.ok() ? Internal("master answered BatchPutStart with a wrong number of results")
                          : impl_->RpcError(rpc, "BatchPutStart");
    return std::vector<Status>(keys.size(), err);
  }
  impl_->OpenSegments(started.segments());
  // Invariant 2: finish well inside the master's put timeout.
  const SteadyTime deadline =
      std::min(sent + milliseconds(started.put_timeout_ms() / 2), Now() + impl_->options.transfer_timeout);

  std::vector<transfer::TransferRequest> requests;
  std::vector<size_t> owner;
  for (size_t i = 0; i < keys.size(); ++i) {
    const proto::PutStartResult& r = started.results(static_cast<int>(i));
    if (r.code() != proto::OK) {
      results[i] = FromProtoCode(r.code(), r.message(), keys[i]);
      continue;
    }
    for (const auto& replica : r.replicas()) {
      requests.push_back({transfer::OpKind::kWrite, const_cast<std::byte*>(values[i].data()), replica.segment_id(),
                          replica.offset(), replica.length()});
      owner.push_back(i);
    }
  }
  std::vector<Status> per_request;
  if (!requests.empty()) (void)impl_->engine.Transfer(requests, deadline, &per_request);
  for (size_t q = 0; q < requests.size(); ++q) {
    Status s = q < per_request.size() ? per_request[q] : Internal("transfer engine lost a result");
    if (!s.ok() && results[owner[q]].ok()) results[owner[q]] = s;
  }

  proto::BatchKeysRequest end, revoke;
  std::vector<size_t> end_index;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (started.results(static_cast<int>(i)).code() != proto::OK) continue;
    if (results[i].ok()) {
      end.add_keys(keys[i]);
      end_index.push_back(i);
    } else if (!MayStillBeWriting(results[i])) {
      revoke.add_keys(keys[i]);
    }
  }
  if (revoke.keys_size() > 0) {
    proto::BatchKeysReply ignored;
    grpc::ClientContext ctx;
    impl_->ConfigureContext(ctx);
    (void)impl_->stub->BatchPutRevoke(&ctx, revoke, &ignored);  // else the master's put timeout reclaims it
  }
  if (end.keys_size() > 0) {
    proto::BatchKeysReply ended;
    grpc::ClientContext ctx;
    impl_->ConfigureContext(ctx);
    rpc = impl_->stub->BatchPutEnd(&ctx, end, &ended);
    for (size_t j = 0; j < end_index.size(); ++j) {
      const size_t i = end_index[j];
      if (!rpc.ok()) {
        results[i] = impl_->RpcError(rpc, "BatchPutEnd");
      } else if (static_cast<int>(j) >= ended.results_size()) {
        results[i] = Internal("master answered BatchPutEnd with too few results");
      } else if (ended.results(static_cast<int>(j)).code() != proto::OK) {
        results[i] = FromProtoCode(ended.results(static_cast<int>(j)).code(),
                                   ended.results(static_cast<int>(j)).message(), keys[i]);
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
  auto results = impl_->Read(lookup, std::span<const size_t>(&first, 1), [&](size_t, uint64_t length) -> Result<ValueBuffer> {
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
                                                   std::span<const ValueBuffer> buffers) {
  if (indices.size() != buffers.size()) {
    return std::vector<Result<uint64_t>>(indices.size(), InvalidArgument("ReadLookedUp needs one buffer per index"));
  }
  return impl_->Read(lookup, indices, [&](size_t j, uint64_t length) -> Result<ValueBuffer> {
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
  proto::BatchKeysRequest request;
  request.mutable_keys()->Reserve(static_cast<int>(keys.size()));
  for (const auto& k : keys) request.add_keys(k);
  proto::BatchExistsReply reply;
  grpc::ClientContext ctx;
  impl_->ConfigureContext(ctx);
  grpc::Status rpc = impl_->stub->BatchExists(&ctx, request, &reply);
  if (!rpc.ok()) return impl_->RpcError(rpc, "BatchExists");
  if (reply.exists().size() != keys.size()) return Internal("master answered BatchExists with a wrong number of results");
  std::vector<bool> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = reply.exists()[i] != 0;
  return out;
}

Status Client::Remove(std::string_view key) {
  const std::string k(key);
  return BatchRemove(std::span<const std::string>(&k, 1))[0];
}

std::vector<Status> Client::BatchRemove(std::span<const std::string> keys) {
  proto::BatchKeysRequest request;
  for (const auto& k : keys) request.add_keys(k);
  proto::BatchKeysReply reply;
  grpc::ClientContext ctx;
  impl_->ConfigureContext(ctx);
  grpc::Status rpc = impl_->stub->BatchRemove(&ctx, request, &reply);
  if (!rpc.ok()) return std::vector<Status>(keys.size(), impl_->RpcError(rpc, "BatchRemove"));
  if (reply.results_size() != static_cast<int>(keys.size()))
    return std::vector<Status>(keys.size(), Internal("master answered BatchRemove with a wrong number of results"));
  std::vector<Status> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    out.push_back(FromProtoCode(reply.results(static_cast<int>(i)).code(), reply.results(static_cast<int>(i)).message(), keys[i]));
  return out;
}

Result<PoolStats> Client::Stat() {
  proto::StatRequest request;
  proto::StatReply reply;
  grpc::ClientContext ctx;
  impl_->ConfigureContext(ctx);
  grpc::Status rpc = impl_->stub->Stat(&ctx, request, &reply);
  if (!rpc.ok()) return impl_->RpcError(rpc, "Stat");
  PoolStats s;
  s.objects = reply.objects();
  s.used_bytes = reply.used_bytes();
  s.capacity_bytes = reply.capacity_bytes();
  s.evicted_objects = reply.evicted_objects();
  s.evicted_bytes = reply.evicted_bytes();
  s.hits = reply.hits();
  s.misses = reply.misses();
  for (const auto& seg : reply.segments()) {
    s.segments.push_back({seg.segment().segment_id(), seg.segment().store_id(), seg.segment().host_id(),
                          seg.segment().tcp_address(), seg.segment().size(), seg.used_bytes(), seg.objects()});
  }
  return s;
}

Status Client::RegisterBuffer(void* addr, size_t length) { return impl_->engine.RegisterMemory(addr, length); }
Status Client::UnregisterBuffer(void* addr) { return impl_->engine.UnregisterMemory(addr); }
transfer::TransferEngine& Client::transfer_engine() { return impl_->engine; }

}  // namespace kvpool::client
