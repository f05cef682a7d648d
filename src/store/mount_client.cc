#include "store/mount_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "proto/rpc_security.h"
#include "proto/status_conversion.h"

namespace kvpool::store {
namespace {

// The Status for a reply's code. FromProtoCode speaks of keys; these calls have none.
Status ReplyStatus(proto::Code code, const std::string& message, std::string_view call) {
  if (code == proto::OK) return Status::Ok();
  return FromProtoCode(code, message.empty() ? fmt::format("master answered {} with code {}",
                                                           call, static_cast<int>(code))
                                             : message,
                       "");
}

// gRPC backs off up to 120 s between reconnects by default; a store would then miss its
// heartbeat ttl long after the master is back. Retry about as often as we beat.
std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address, std::chrono::milliseconds rpc_timeout,
                                             const proto::RpcCredentials& credentials) {
  grpc::ChannelArguments args;
  const int max_backoff_ms = static_cast<int>(std::clamp<int64_t>(rpc_timeout.count(), 100, 1000));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff_ms);
  // A rejoin carries the segment's whole index; index pulls carry thousands of keys.
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(-1);
  return proto::SecureChannel(address, args, credentials);
}

}  // namespace

std::unique_ptr<etcd::PartLeader> LeaderOf(const std::string& etcd, uint32_t part) {
  if (etcd.empty()) return nullptr;
  auto client = etcd::EtcdClient::Create(etcd);
  // StorageService::Start checked the endpoints; a malformed list here is a programming error.
  if (!client.ok()) return nullptr;
  return std::make_unique<etcd::PartLeader>(std::shared_ptr<etcd::EtcdClient>(*std::move(client)), part);
}

MountClient::MountClient(std::string master_address, std::string etcd, uint32_t part,
                         std::chrono::milliseconds rpc_timeout, proto::RpcCredentials credentials)
    : part_(part), rpc_timeout_(rpc_timeout), credentials_(std::move(credentials)), leader_(LeaderOf(etcd, part)) {
  if (!master_address.empty()) Point(master_address);
}

void MountClient::Point(const std::string& address) {
  address_ = address;
  stub_ = proto::Master::NewStub(MasterChannel(address, rpc_timeout_, credentials_));
}

std::string MountClient::master_address() const {
  std::lock_guard lock(mu_);
  return address_;
}

std::shared_ptr<proto::Master::Stub> MountClient::Stub(std::string* address) {
  {
    std::lock_guard lock(mu_);
    if (stub_ || !leader_) {
      *address = address_;
      return stub_;
    }
  }
  FollowLeader();
  std::lock_guard lock(mu_);
  *address = address_.empty() ? fmt::format("(no leader of part {} in etcd {} yet)", part_,
                                            leader_->etcd_endpoints())
                              : address_;
  return stub_;
}

bool MountClient::FollowLeader() {
  if (!leader_) return false;
  auto leader = leader_->Find(rpc_timeout_);
  if (!leader.ok()) return false;
  std::lock_guard lock(mu_);
  if (leader->value == address_) return false;
  Point(leader->value);
  return true;
}

bool MountClient::Enter(grpc::ClientContext* context) {
  std::lock_guard lock(mu_);
  if (interrupted_) return false;
  in_flight_.insert(context);
  return true;
}

void MountClient::Leave(grpc::ClientContext* context) {
  std::lock_guard lock(mu_);
  in_flight_.erase(context);
}

void MountClient::Interrupt() {
  std::lock_guard lock(mu_);
  interrupted_ = true;
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
}

Result<MountGrant> MountClient::Mount(const proto::SegmentEndpoint& endpoint) {
  proto::MountSegmentRequest request;
  *request.mutable_segment() = endpoint;
  return Mount(std::move(request), rpc_timeout_);
}

Result<MountGrant> MountClient::Mount(proto::MountSegmentRequest request,
                                      std::chrono::milliseconds timeout) {
  request.set_part(part_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    Result<MountGrant> grant = MountOnce(request, std::max(left, std::chrono::milliseconds(1)));
    // Following etcd, an unreachable master is a leader that died or a standby: wait for the
    // next leader within the call's time.
    if (grant.ok() || grant.status().code() != StatusCode::kUnavailable || !leader_ || left.count() <= 0) return grant;
    {
      std::lock_guard lock(mu_);
      if (interrupted_) return grant;
    }
    if (!FollowLeader()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<MountGrant> MountClient::MountOnce(const proto::MountSegmentRequest& request,
                                          std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  context.set_wait_for_ready(true);
  proto::MountSegmentReply reply;
  std::string address;
  Result<grpc::Status> called = CallMaster(&context, &address, [&](proto::Master::Stub& stub) {
    return stub.MountSegment(&context, request, &reply);
  });
  if (!called.ok()) return called.status();
  const grpc::Status& rpc = *called;
  if (rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      rpc.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Unavailable(fmt::format("master at {} unreachable within {} ms (MountSegment){}",
                                   address, timeout.count(),
                                   rpc.error_message().empty() ? "" : ": " + rpc.error_message()));
  }
  if (rpc.error_code() == grpc::StatusCode::CANCELLED) {
    return Unavailable("storage service is stopping");
  }
  if (!rpc.ok()) return FromGrpcStatus(rpc, "MountSegment", address);
  if (reply.code() != proto::OK) {
    Status refused = ReplyStatus(reply.code(), reply.message(), "MountSegment");
    return Status(refused.code(), fmt::format("master at {} refused the segment: {}", address,
                                              refused.message()));
  }
  if (reply.segment_id() == 0) {
    return Internal(fmt::format("master at {} mounted the segment under id 0", address));
  }
  return MountGrant{reply.segment_id(), std::chrono::milliseconds(reply.heartbeat_ttl_ms()),
                    std::chrono::milliseconds(reply.max_lease_ms()), reply.rebuilt_objects()};
}

Result<proto::PullIndexReply> MountClient::PullIndex(uint64_t segment_id, uint64_t journal_id,
                                                     uint64_t acked_seq,
                                                     const std::vector<proto::TierReport>& reports) {
  grpc::ClientContext context;
  // The master answers within half the deadline (its long-poll wait shrinks to fit).
  context.set_deadline(std::chrono::system_clock::now() + std::max(rpc_timeout_, std::chrono::milliseconds(1000)));
  proto::PullIndexRequest request;
  request.set_segment_id(segment_id);
  request.set_journal_id(journal_id);
  request.set_acked_seq(acked_seq);
  request.mutable_tier_reports()->Add(reports.begin(), reports.end());
  proto::PullIndexReply reply;
  std::string address;
  Result<grpc::Status> rpc = CallMaster(&context, &address, [&](proto::Master::Stub& stub) {
    return stub.PullIndex(&context, request, &reply);
  });
  if (!rpc.ok()) return rpc.status();
  if (!rpc->ok()) return FromGrpcStatus(*rpc, "PullIndex", address);
  if (reply.code() != proto::OK) return ReplyStatus(reply.code(), reply.message(), "PullIndex");
  return reply;
}

Result<std::vector<uint64_t>> MountClient::Heartbeat(const std::string& store_id,
                                                     const std::vector<uint64_t>& segment_ids) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
  proto::HeartbeatRequest request;
  request.set_store_id(store_id);
  for (uint64_t id : segment_ids) request.add_segment_ids(id);
  proto::HeartbeatReply reply;
  std::string address;
  Result<grpc::Status> rpc = CallMaster(&context, &address, [&](proto::Master::Stub& stub) {
    return stub.Heartbeat(&context, request, &reply);
  });
  if (!rpc.ok()) return rpc.status();
  if (!rpc->ok()) return FromGrpcStatus(*rpc, "Heartbeat", address);
  // A non-OK code with unknown ids is the master saying "remount these": not an error here.
  if (reply.code() != proto::OK && reply.unknown_segment_ids_size() == 0) {
    return ReplyStatus(reply.code(), reply.message(), "Heartbeat");
  }
  return std::vector<uint64_t>(reply.unknown_segment_ids().begin(),
                               reply.unknown_segment_ids().end());
}

Status MountClient::Unmount(uint64_t segment_id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
  proto::UnmountSegmentRequest request;
  request.set_segment_id(segment_id);
  proto::UnmountSegmentReply reply;
  std::string address;
  std::shared_ptr<proto::Master::Stub> stub = Stub(&address);
  if (!stub) return Unavailable(fmt::format("no master to call: {}", address));
  grpc::Status rpc = stub->UnmountSegment(&context, request, &reply);
  if (!rpc.ok()) return FromGrpcStatus(rpc, "UnmountSegment", address);
  return ReplyStatus(reply.code(), reply.message(), "UnmountSegment");
}

}  // namespace kvpool::store
