#include "handoff/handoff_sender.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/checksum.h"
#include "handoff/device_gather.h"
#include "handoff/handoff_auth.h"
#include "handoff/handoff_control.h"
#include "handoff/handoff_copy.h"
#include "handoff/handoff_copy_cuda.h"
#include "handoff/handoff_plan.h"
#include "transfer/socket_util.h"
#include "transfer/unique_fd.h"

namespace kvpool::handoff {
namespace {

using Clock = std::chrono::steady_clock;

Result<transfer::UniqueFd> ConnectTcp(const std::string& address, Clock::time_point deadline) {
  auto resolved = transfer::ResolveTcpAddress(address);
  if (!resolved.ok()) return resolved.status();
  transfer::UniqueFd fd(::socket(resolved->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return transfer::ErrnoStatus(StatusCode::kInternal, "handoff sender: socket", errno);
  if (::connect(fd.get(), resolved->get(), resolved->length) != 0 && errno != EINPROGRESS) {
    return transfer::ErrnoStatus(StatusCode::kUnavailable, fmt::format("handoff sender: connect {}", address), errno);
  }
  pollfd p{fd.get(), POLLOUT, 0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left))) <= 0) {
    return Timeout(fmt::format("handoff sender: connect {}: no answer", address));
  }
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return transfer::ErrnoStatus(StatusCode::kUnavailable, fmt::format("handoff sender: connect {}", address), err);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

struct HandoffSender::Impl {
  PrefillLayout prefill;
  DecodeLayout decode;
  uint32_t rank = 0;
  uint64_t fingerprint = 0;
  transfer::UniqueFd control;
  transfer::TransferEngine engine;
  uint64_t segment_id = 0;
  uint64_t slot_bytes = 0;
  std::vector<std::byte> piece;  // one gathered piece, reused (caches in host memory)
  // Caches in GPU memory: the gather on that GPU and the current request's device table, both
  // kept for the next request.
  std::unique_ptr<DeviceGather> device_gather;
  std::unique_ptr<DeviceKvTable> device_table;
  std::mutex mu;                 // one Send at a time
  Status broken;                 // set once the connection is unusable

  explicit Impl(const HandoffSenderOptions& o) : engine(o.transfer) {}

  // Sends `m` and, if `reply_type` is set, reads the answer; a socket failure breaks the sender.
  Result<ControlMessage> Exchange(const ControlMessage& m, std::optional<ControlType> reply_type,
                                  Clock::time_point deadline) {
    Status sent = SendControl(control.get(), m, deadline);
    if (!sent.ok()) return Break(sent);
    if (!reply_type) return ControlMessage{};
    Result<ControlMessage> reply = ReceiveControl(control.get(), deadline);
    if (!reply.ok()) return Break(reply.status());
    if (reply->type != *reply_type || reply->request_id != m.request_id) {
      return Break(InvalidArgument("handoff sender: the receiver answered out of turn"));
    }
    return reply;
  }
  Status Break(Status why) {
    broken = Unavailable(fmt::format("handoff connection is broken ({}); connect a new sender", why.ToString()));
    control.Reset();
    return why.code() == StatusCode::kTimeout ? why : Unavailable(why.message());
  }
  // Readies device_gather and device_table for a cache on `device` (nothing is sent).
  Status PrepareDevice(const PagedKvCache& cache, std::span<const BlockId> table, int device) {
    if (!device_gather || device_gather->device() != device) {
      device_gather.reset();
      auto made = DeviceGather::Create(device, slot_bytes);
      if (!made.ok()) return made.status();
      device_gather = std::move(made).value();
    }
    return DeviceKvTable::Load(device_table, cache, table, device);
  }
  // Gathers `write` of `pair` into host memory; returns where its bytes are.
  Result<std::byte*> Gather(const PairPlan& pair, const HandoffWrite& write, const PagedKvCache& cache,
                            std::span<const BlockId> table, bool on_device) {
    if (on_device) {
      KVPOOL_RETURN_IF_ERROR(device_gather->GatherPiece(pair, write, *device_table));
      return device_gather->host_piece();
    }
    KVPOOL_RETURN_IF_ERROR(GatherCpu(pair, cache, table, piece.data(), &write));
    return piece.data();
  }
  Status SendPart(uint64_t request_id, const HandoffPlan& plan, const PagedKvCache& cache,
                  std::span<const BlockId> table, bool on_device, Clock::time_point deadline);
};

Result<std::unique_ptr<HandoffSender>> HandoffSender::Connect(const std::string& address, PrefillLayout prefill,
                                                              DecodeLayout decode, uint32_t prefill_rank,
                                                              HandoffSenderOptions options) {
  KVPOOL_RETURN_IF_ERROR(ValidateHandoffLayouts(prefill, decode));
  if (prefill_rank >= prefill.num_ranks()) {
    return InvalidArgument(fmt::format("prefill rank {} of {}", prefill_rank, prefill.num_ranks()));
  }
  auto impl = std::make_unique<Impl>(options);
  const auto deadline = Clock::now() + options.connect_timeout;
  auto fd = ConnectTcp(address, deadline);
  if (!fd.ok()) return fd.status();
  impl->control = std::move(fd).value();
  auto hello = ReceiveHello(impl->control.get(), options.transfer.secret, address, deadline);
  if (hello.status().code() == StatusCode::kUnauthenticated || hello.status().code() == StatusCode::kInvalidArgument) {
    return hello.status();
  }
  if (!hello.ok()) return Unavailable(fmt::format("handoff sender: no hello from {}: {}", address, hello.status().ToString()));
  if (hello->type != ControlType::kHello) return InvalidArgument(fmt::format("handoff sender: {} is not a handoff receiver", address));
  // text: "<tcp address>\n<shm socket>\n<host id>"
  const std::string& t = hello->text;
  const size_t a = t.find('\n'), b = a == std::string::npos ? a : t.find('\n', a + 1);
  if (b == std::string::npos || hello->c == 0 || hello->b < hello->c) {
    return InvalidArgument(fmt::format("handoff sender: malformed hello from {}", address));
  }
  transfer::SegmentEndpoint endpoint;
  endpoint.segment_id = hello->a;
  endpoint.store_id = "handoff-landing";
  endpoint.tcp_address = t.substr(0, a);
  endpoint.shm_socket = t.substr(a + 1, b - a - 1);
  endpoint.host_id = t.substr(b + 1);
  endpoint.size = hello->b;
  KVPOOL_RETURN_IF_ERROR(impl->engine.OpenSegment(endpoint));
  impl->segment_id = hello->a;
  impl->slot_bytes = hello->c;
  impl->piece.resize(impl->slot_bytes);
  impl->prefill = std::move(prefill);
  impl->decode = std::move(decode);
  impl->rank = prefill_rank;
  impl->fingerprint = LayoutsFingerprint(impl->prefill, impl->decode);
  return std::unique_ptr<HandoffSender>(new HandoffSender(std::move(impl)));
}

HandoffSender::HandoffSender(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HandoffSender::~HandoffSender() = default;

std::string HandoffSender::transport() const { return impl_->engine.TransportFor(impl_->segment_id); }

Status HandoffSender::Send(uint64_t request_id, uint64_t first_token, uint64_t end_token, const PagedKvCache& cache,
                           std::span<const BlockId> table, std::chrono::steady_clock::time_point deadline,
                           int cuda_device) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.mu);
  if (!impl.broken.ok()) return impl.broken;
  if (cuda_device < -1) {
    return InvalidArgument(fmt::format("handoff sender: cuda_device {} (-1: host memory)", cuda_device));
  }
  if (cuda_device >= 0) KVPOOL_RETURN_IF_ERROR(impl.PrepareDevice(cache, table, cuda_device));
  // Planned with the receiver's slot size, so every piece fits one slot.
  auto plan = PlanHandoff(impl.prefill, impl.decode, first_token, end_token, {impl.slot_bytes});
  if (!plan.ok()) return plan.status();
  for (uint32_t d = 0; d < impl.decode.dcp_ranks; ++d) {
    KVPOOL_RETURN_IF_ERROR(CheckGather(plan->pair(impl.rank, d), cache, table));
  }
  ControlMessage begin;
  begin.type = ControlType::kBegin;
  begin.request_id = request_id;
  begin.a = impl.rank;
  begin.b = first_token;
  begin.c = end_token;
  begin.d = impl.fingerprint;
  auto began = impl.Exchange(begin, ControlType::kReply, deadline);
  if (!began.ok()) return began.status();
  if (!began->status().ok()) return began->status();
  return impl.SendPart(request_id, *plan, cache, table, cuda_device >= 0, deadline);
}

Status HandoffSender::Impl::SendPart(uint64_t request_id, const HandoffPlan& plan, const PagedKvCache& cache,
                                     std::span<const BlockId> table, bool on_device, Clock::time_point deadline) {
  for (uint32_t d = 0; d < decode.dcp_ranks; ++d) {
    const PairPlan& pair = plan.pair(rank, d);
    for (size_t w = 0; w < pair.writes.size(); ++w) {
      const HandoffWrite& write = pair.writes[w];
      // Gather before asking for a slot: the slot is held only while the bytes travel.
      // A gather that fails after Begin (a CUDA error) leaves the receiver waiting for this
      // part: breaking the connection makes it fail the request now.
      auto bytes = Gather(pair, write, cache, table, on_device);
      if (!bytes.ok()) {
        static_cast<void>(Break(bytes.status()));
        return bytes.status();
      }
      ControlMessage ask;
      ask.type = ControlType::kSlotRequest;
      ask.request_id = request_id;
      auto grant = Exchange(ask, ControlType::kSlotGrant, deadline);
      if (!grant.ok()) return grant.status();
      if (!grant->status().ok()) return grant->status();
      const transfer::TransferRequest put{transfer::OpKind::kWrite, *bytes, segment_id, grant->a, write.length};
      Status written = engine.Transfer({&put, 1}, deadline);
      // A write that failed or ran late may still land: the receiver's slot cannot be trusted,
      // and only dropping the connection makes it quarantine the slot.
      if (!written.ok()) return Break(written);
      ControlMessage landed;
      landed.type = ControlType::kPieceWritten;
      landed.request_id = request_id;
      landed.a = grant->a;
      landed.b = d;
      landed.c = w;
      landed.d = Checksum(*bytes, write.length);
      auto announced = Exchange(landed, std::nullopt, deadline);
      if (!announced.ok()) return announced.status();
    }
  }
  ControlMessage end;
  end.type = ControlType::kEnd;
  end.request_id = request_id;
  auto ended = Exchange(end, ControlType::kReply, deadline);
  if (!ended.ok()) return ended.status();
  return ended->status();
}

}  // namespace kvpool::handoff
