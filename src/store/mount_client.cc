#include "store/mount_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include <fmt/format.h>

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
std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address,
                                             std::chrono::milliseconds rpc_timeout) {
  grpc::ChannelArguments args;
  const int max_backoff_ms = static_cast<int>(std::clamp<int64_t>(rpc_timeout.count(), 100, 1000));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff_ms);
  // A rejoin carries the segment's whole index; index pulls carry thousands of keys.
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

MountClient::MountClient(std::string master_address, uint32_t part, std::chrono::milliseconds rpc_timeout)
    : address_(std::move(master_address)),
      part_(part),
      rpc_timeout_(rpc_timeout),
      stub_(proto::Master::NewStub(MasterChannel(address_, rpc_timeout))) {}

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
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  context.set_wait_for_ready(true);
  if (!Enter(&context)) return Unavailable("storage service is stopping");
  request.set_part(part_);
  proto::MountSegmentReply reply;
  grpc::Status rpc = stub_->MountSegment(&context, request, &reply);
  Leave(&context);
  if (rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      rpc.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Unavailable(fmt::format("master at {} unreachable within {} ms (MountSegment){}",
                                   address_, timeout.count(),
                                   rpc.error_message().empty() ? "" : ": " + rpc.error_message()));
  }
  if (rpc.error_code() == grpc::StatusCode::CANCELLED) {
    return Unavailable("storage service is stopping");
  }
  if (!rpc.ok()) return FromGrpcStatus(rpc, "MountSegment", address_);
  if (reply.code() != proto::OK) {
    Status refused = ReplyStatus(reply.code(), reply.message(), "MountSegment");
    return Status(refused.code(), fmt::format("master at {} refused the segment: {}", address_,
                                              refused.message()));
  }
  if (reply.segment_id() == 0) {
    return Internal(fmt::format("master at {} mounted the segment under id 0", address_));
  }
  return MountGrant{reply.segment_id(), std::chrono::milliseconds(reply.heartbeat_ttl_ms()),
                    std::chrono::milliseconds(reply.max_lease_ms()), reply.rebuilt_objects()};
}

Result<proto::PullIndexReply> MountClient::PullIndex(uint64_t segment_id, uint64_t journal_id,
                                                     uint64_t acked_seq) {
  grpc::ClientContext context;
  // The master answers within half the deadline (its long-poll wait shrinks to fit).
  context.set_deadline(std::chrono::system_clock::now() + std::max(rpc_timeout_, std::chrono::milliseconds(1000)));
  if (!Enter(&context)) return Unavailable("storage service is stopping");
  proto::PullIndexRequest request;
  request.set_segment_id(segment_id);
  request.set_journal_id(journal_id);
  request.set_acked_seq(acked_seq);
  proto::PullIndexReply reply;
  grpc::Status rpc = stub_->PullIndex(&context, request, &reply);
  Leave(&context);
  if (!rpc.ok()) return FromGrpcStatus(rpc, "PullIndex", address_);
  if (reply.code() != proto::OK) return ReplyStatus(reply.code(), reply.message(), "PullIndex");
  return reply;
}

Result<std::vector<uint64_t>> MountClient::Heartbeat(const std::string& store_id,
                                                     const std::vector<uint64_t>& segment_ids) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + rpc_timeout_);
  if (!Enter(&context)) return Unavailable("storage service is stopping");
  proto::HeartbeatRequest request;
  request.set_store_id(store_id);
  for (uint64_t id : segment_ids) request.add_segment_ids(id);
  proto::HeartbeatReply reply;
  grpc::Status rpc = stub_->Heartbeat(&context, request, &reply);
  Leave(&context);
  if (!rpc.ok()) return FromGrpcStatus(rpc, "Heartbeat", address_);
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
  grpc::Status rpc = stub_->UnmountSegment(&context, request, &reply);
  if (!rpc.ok()) return FromGrpcStatus(rpc, "UnmountSegment", address_);
  return ReplyStatus(reply.code(), reply.message(), "UnmountSegment");
}

}  // namespace kvpool::store
