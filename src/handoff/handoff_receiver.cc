#include "handoff/handoff_receiver.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "handoff/device_scatter.h"
#include "handoff/handoff_auth.h"
#include "handoff/handoff_control.h"
#include "handoff/handoff_copy.h"
#include "handoff/handoff_piece.h"
#include "handoff/handoff_plan.h"
#include "transfer/memfd_region.h"
#include "transfer/segment_server.h"
#include "transfer/socket_util.h"
#include "transfer/transfer_engine.h"
#include "transfer/unique_fd.h"

namespace kvpool::handoff {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kIdle = std::chrono::hours(24);          // a connection may sit idle this long
constexpr auto kReplyTimeout = std::chrono::seconds(10);  // a reply the sender does not read
// Bounce slots per GPU: pieces (of one request or several) are scattered concurrently, one per
// connection thread; four let the four stages of a PP4 prefill copy and scatter at once.
constexpr uint32_t kDeviceBounceSlots = 4;

struct Request {
  uint64_t id = 0;
  HandoffPlan plan;
  std::vector<DecodeTarget> targets;
  // Per decode rank whose cache is device memory: the table uploaded to its GPU and that GPU's
  // scatter (owned by the receiver). Null for host caches.
  std::vector<std::unique_ptr<DeviceKvTable>> device_tables;
  std::vector<DeviceScatter*> device_scatters;
  Clock::time_point deadline;

  std::mutex mu;  // guards the rest
  std::condition_variable idle;  // scattering dropped to 0
  std::vector<std::vector<bool>> landed;  // [pair index][piece]: claimed by a scatter (done or running)
  uint64_t pieces_left = 0;
  // Pieces being checked and scattered outside mu (each by its connection's thread, so the
  // stages' pieces scatter in parallel). Nothing answers or cancels the request while > 0.
  uint32_t scattering = 0;
  std::vector<uint8_t> rank_state;  // per prefill rank: 0 not begun, 1 sending, 2 ended
  uint32_t ranks_ended = 0;
  Status error;         // the first failure
  bool closed = false;  // answered, cancelled or timed out: nothing writes its blocks any more
};

// A prefill rank's part of a request that one connection has begun and not ended.
struct Part {
  std::shared_ptr<Request> request;
  uint32_t rank = 0;
};

}  // namespace

struct HandoffReceiver::Impl {
  PrefillLayout prefill;
  DecodeLayout decode;
  HandoffReceiverOptions options;
  uint64_t fingerprint = 0;
  uint64_t segment_id = 0;
  std::unique_ptr<transfer::MemfdRegion> landing;
  std::unique_ptr<transfer::SegmentServer> data_server;
  // Decode caches in device memory: one scatter per GPU, made by the first Expect naming it, and
  // the landing segment page-locked then (if that fails, copies still work, more slowly).
  // Declared after `landing`: unregistered before it is unmapped.
  std::mutex device_mu;  // guards these three; taken alone (never with mu or a request's mu)
  std::map<int, std::unique_ptr<DeviceScatter>> device_scatters;  // never erased: pointers stay valid
  std::unique_ptr<PinnedHostRange> pinned_landing;
  bool pin_tried = false;
  transfer::UniqueFd listener;
  std::string address;
  std::thread acceptor;

  mutable std::mutex mu;  // guards everything below
  std::condition_variable slot_freed;
  std::condition_variable changed;  // a request may have become answerable
  std::unordered_map<uint64_t, std::shared_ptr<Request>> requests;
  std::vector<uint64_t> free_slots;
  std::deque<std::pair<Clock::time_point, uint64_t>> quarantined;  // (reusable from, slot)
  std::set<int> open_fds;
  std::vector<std::thread> connections;
  bool stopping = false;
  HandoffReceiverStats stats;

  void AcceptLoop();
  void Serve(int fd);
  Status Begin(const ControlMessage& m, std::vector<Part>& parts);
  Result<uint64_t> AcquireSlot();
  // False: a protocol violation (the connection is closed).
  bool Land(const ControlMessage& m, std::vector<uint64_t>& held, const std::vector<Part>& parts);
  Status End(const ControlMessage& m, std::vector<Part>& parts);
  void Fail(Request& r, Status why);  // REQUIRES: r.mu held
  // REQUIRES: mu held. Moves quarantined slots whose time has come back to the free list.
  void ReleaseQuarantined();
  // The scatter for GPU `device`, made on first use. UNAVAILABLE without CUDA or that device.
  Result<DeviceScatter*> DeviceScatterFor(int device);
};

Result<std::unique_ptr<HandoffReceiver>> HandoffReceiver::Start(PrefillLayout prefill, DecodeLayout decode,
                                                                HandoffReceiverOptions options) {
  KVPOOL_RETURN_IF_ERROR(ValidateHandoffLayouts(prefill, decode));
  if (options.max_write_bytes == 0 || options.landing_bytes < options.max_write_bytes) {
    return InvalidArgument(fmt::format("handoff receiver: landing of {} B holds no slot of {} B",
                                       options.landing_bytes, options.max_write_bytes));
  }
  auto impl = std::make_unique<Impl>();
  impl->prefill = std::move(prefill);
  impl->decode = std::move(decode);
  impl->options = options;
  impl->fingerprint = LayoutsFingerprint(impl->prefill, impl->decode);
  impl->segment_id = std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
  const uint64_t slots = options.landing_bytes / options.max_write_bytes;
  auto landing = transfer::MemfdRegion::Create(slots * options.max_write_bytes, "kvpool-handoff-landing");
  if (!landing.ok()) return landing.status();
  impl->landing = std::move(landing).value();
  for (uint64_t s = slots; s-- > 0;) impl->free_slots.push_back(s * options.max_write_bytes);

  transfer::SegmentServerOptions so;
  so.tcp_listen = options.data_listen;
  so.secret = options.secret;
  so.ucx = options.ucx;
  if (!options.shm_socket_dir.empty()) {
    so.shm_socket_path = fmt::format("{}/kvpool-handoff-{:x}.sock", options.shm_socket_dir, impl->segment_id);
  }
  auto server = transfer::SegmentServer::Start(so);
  if (!server.ok()) return server.status();
  impl->data_server = std::move(server).value();
  impl->data_server->Serve({impl->segment_id, impl->landing->data(), impl->landing->size(),
                            options.shm_socket_dir.empty() ? -1 : impl->landing->memfd()});

  auto address = transfer::ResolveTcpAddress(options.listen);
  if (!address.ok()) return address.status();
  transfer::UniqueFd fd(::socket(address->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return transfer::ErrnoStatus(StatusCode::kInternal, "handoff receiver: socket", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), address->get(), address->length) != 0) {
    return transfer::ErrnoStatus(StatusCode::kUnavailable, fmt::format("handoff receiver: bind {}", options.listen),
                                 errno);
  }
  if (::listen(fd.get(), 256) != 0) return transfer::ErrnoStatus(StatusCode::kInternal, "handoff receiver: listen", errno);
  transfer::SocketAddress bound;
  bound.length = sizeof(bound.storage);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound.storage), &bound.length);
  impl->address = transfer::FormatSocketAddress(bound);
  impl->listener = std::move(fd);
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->AcceptLoop(); });
  return std::unique_ptr<HandoffReceiver>(new HandoffReceiver(std::move(impl)));
}

HandoffReceiver::HandoffReceiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HandoffReceiver::~HandoffReceiver() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (int fd : impl_->open_fds) ::shutdown(fd, SHUT_RDWR);  // wakes their threads
  }
  impl_->slot_freed.notify_all();
  impl_->acceptor.join();
  // No new connection threads once the acceptor is gone.
  for (std::thread& t : impl_->connections) t.join();
  impl_->data_server->Stop();
  // No copy reads the landing segment any more (scatters ran on the connection threads).
  std::lock_guard<std::mutex> lock(impl_->device_mu);
  impl_->pinned_landing.reset();
}

std::string HandoffReceiver::address() const { return impl_->address; }

void HandoffReceiver::Impl::AcceptLoop() {
  for (;;) {
    pollfd p{listener.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) return;
    if (ready <= 0) continue;
    const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    open_fds.insert(fd);
    connections.emplace_back([this, fd] { Serve(fd); });
  }
}

void HandoffReceiver::Impl::Serve(int fd) {
  std::vector<uint64_t> held;  // slots granted to this connection and not yet landed
  std::vector<Part> parts;
  ControlMessage hello;
  hello.type = ControlType::kHello;
  hello.a = segment_id;
  hello.b = landing->size();
  hello.c = options.max_write_bytes;
  hello.text = fmt::format("{}\n{}\n{}", data_server->tcp_address(), data_server->shm_socket_path(),
                           transfer::LocalHostId());
  Status status = options.secret ? DemandSenderProof(fd, *options.secret, Clock::now() + kReplyTimeout) : Status::Ok();
  if (status.ok()) status = SendControl(fd, hello, Clock::now() + kReplyTimeout);
  while (status.ok()) {
    Result<ControlMessage> m = ReceiveControl(fd, Clock::now() + kIdle);
    if (!m.ok()) {
      status = m.status();
      break;
    }
    ControlMessage reply;
    reply.type = ControlType::kReply;
    reply.request_id = m->request_id;
    switch (m->type) {
      case ControlType::kBegin:
        reply.text = (status = Begin(*m, parts)).message();
        reply.code = status.code();
        status = SendControl(fd, reply, Clock::now() + kReplyTimeout);
        break;
      case ControlType::kSlotRequest: {
        Result<uint64_t> slot = AcquireSlot();
        reply.type = ControlType::kSlotGrant;
        if (slot.ok()) {
          held.push_back(*slot);
          reply.a = *slot;
        } else {
          reply.code = slot.status().code();
          reply.text = slot.status().message();
        }
        status = SendControl(fd, reply, Clock::now() + kReplyTimeout);
        break;
      }
      case ControlType::kPieceWritten:
        if (!Land(*m, held, parts)) status = InvalidArgument("a piece in a slot or part this connection does not hold");
        break;
      case ControlType::kEnd: {
        const Status ended = End(*m, parts);
        reply.code = ended.code();
        reply.text = ended.message();
        status = SendControl(fd, reply, Clock::now() + kReplyTimeout);
        break;
      }
      default:
        status = InvalidArgument(fmt::format("unexpected message type {} from a sender", static_cast<int>(m->type)));
    }
  }
  if (status.code() != StatusCode::kUnavailable) spdlog::warn("handoff receiver: closing a connection: {}", status.ToString());
  for (Part& part : parts) {
    std::lock_guard<std::mutex> lock(part.request->mu);
    Fail(*part.request, Unavailable(fmt::format("prefill rank {}'s connection was lost mid-request", part.rank)));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    // A write its sender already queued may still land in these slots: not reused for a while.
    for (uint64_t slot : held) quarantined.emplace_back(Clock::now() + options.slot_quarantine, slot);
    open_fds.erase(fd);
    ::close(fd);
  }
  changed.notify_all();
  // A slot request already waiting chose its wake-up time when nothing was quarantined (these
  // slots were held): wake it so it waits for the quarantine's end, not its whole request_timeout.
  if (!held.empty()) slot_freed.notify_all();
}

Status HandoffReceiver::Impl::Begin(const ControlMessage& m, std::vector<Part>& parts) {
  std::shared_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = requests.find(m.request_id);
    if (it == requests.end()) {
      return NotFound(fmt::format("decode does not expect request {} (not admitted, cancelled or timed out)",
                                  m.request_id));
    }
    r = it->second;
  }
  if (m.d != fingerprint) return InvalidArgument("prefill and decode were configured with different layouts");
  std::lock_guard<std::mutex> lock(r->mu);
  if (r->closed) return NotFound(fmt::format("request {} is no longer expected", m.request_id));
  if (m.b != r->plan.first_token || m.c != r->plan.end_token) {
    return InvalidArgument(fmt::format("request {}: prefill sends tokens [{}, {}), decode expects [{}, {})",
                                       m.request_id, m.b, m.c, r->plan.first_token, r->plan.end_token));
  }
  if (m.a >= r->rank_state.size()) return InvalidArgument(fmt::format("prefill rank {} does not exist", m.a));
  const uint32_t rank = static_cast<uint32_t>(m.a);
  if (r->rank_state[rank] != 0) {
    return AlreadyExists(fmt::format("request {}: prefill rank {} already sent its part", m.request_id, rank));
  }
  r->rank_state[rank] = 1;
  parts.push_back({r, rank});
  return Status::Ok();
}

void HandoffReceiver::Impl::ReleaseQuarantined() {
  const auto now = Clock::now();
  while (!quarantined.empty() && quarantined.front().first <= now) {
    free_slots.push_back(quarantined.front().second);
    quarantined.pop_front();
  }
}

Result<uint64_t> HandoffReceiver::Impl::AcquireSlot() {
  std::unique_lock<std::mutex> lock(mu);
  const auto deadline = Clock::now() + options.request_timeout;
  ReleaseQuarantined();
  if (free_slots.empty()) ++stats.slot_waits;
  while (free_slots.empty() && !stopping) {
    auto until = deadline;
    if (!quarantined.empty()) until = std::min(until, quarantined.front().first);
    if (slot_freed.wait_until(lock, until) == std::cv_status::timeout && Clock::now() >= deadline) {
      return Timeout(fmt::format("no landing slot came free within {} ms", options.request_timeout.count()));
    }
    ReleaseQuarantined();
  }
  if (stopping) return Unavailable("handoff receiver is shutting down");
  const uint64_t slot = free_slots.back();
  free_slots.pop_back();
  return slot;
}

void HandoffReceiver::Impl::Fail(Request& r, Status why) {
  if (r.error.ok() && !r.closed) r.error = std::move(why);
}

bool HandoffReceiver::Impl::Land(const ControlMessage& m, std::vector<uint64_t>& held, const std::vector<Part>& parts) {
  const uint64_t offset = m.a;
  auto slot = std::find(held.begin(), held.end(), offset);
  auto part = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.request->id == m.request_id; });
  if (slot == held.end() || part == parts.end()) return false;
  held.erase(slot);
  Request& r = *part->request;
  uint64_t scattered_bytes = 0;
  // 1. Under r.mu: is the piece in the plan, and new? Then claim it.
  std::optional<AnnouncedPiece> piece;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.closed && r.error.ok()) {
      Result<AnnouncedPiece> found = FindAnnouncedPiece(m, r.plan, part->rank, r.landed);
      if (!found.ok()) {
        Fail(r, found.status());
      } else {
        piece = *found;
        r.landed[piece->pair_index][piece->index] = true;
        ++r.scattering;
      }
    }
  }
  // 2. Without it (the plan, targets and device tables are fixed since Expect): check the
  //    checksum and scatter. A device scatter returns only once the piece is in the GPU cache:
  //    counted as landed, and its slot freed, only after that.
  if (piece) {
    const uint32_t d = piece->decode_rank;
    const std::byte* bytes = reinterpret_cast<const std::byte*>(landing->data()) + offset;
    Status scattered = CheckPieceChecksum(m, *piece, std::span(bytes, options.max_write_bytes));
    if (scattered.ok()) {
      scattered = r.device_tables[d]
                      ? r.device_scatters[d]->ScatterPiece(*piece->pair, *piece->write, bytes, *r.device_tables[d])
                      : ScatterCpu(*piece->pair, bytes, *r.targets[d].cache, r.targets[d].table, piece->write);
    }
    std::lock_guard<std::mutex> lock(r.mu);
    if (scattered.ok()) {
      --r.pieces_left;
      scattered_bytes = piece->write->length;
    } else {
      Fail(r, scattered);
    }
    if (--r.scattering == 0) r.idle.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu);  // never while holding r.mu: Poll locks mu, then r.mu
    free_slots.push_back(offset);
    if (scattered_bytes > 0) {
      ++stats.pieces;
      stats.bytes += scattered_bytes;
    }
  }
  slot_freed.notify_one();
  changed.notify_all();  // the request may have become answerable (its last scatter, or a failure)
  return true;
}

Status HandoffReceiver::Impl::End(const ControlMessage& m, std::vector<Part>& parts) {
  auto part = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.request->id == m.request_id; });
  if (part == parts.end()) return NotFound(fmt::format("request {}: END without BEGIN", m.request_id));
  Status status;
  {
    Request& r = *part->request;
    std::lock_guard<std::mutex> lock(r.mu);
    for (uint32_t d = 0; d < r.plan.decode.dcp_ranks && r.error.ok(); ++d) {
      const auto& landed = r.landed[uint64_t{part->rank} * r.plan.decode.dcp_ranks + d];
      if (std::find(landed.begin(), landed.end(), false) != landed.end()) {
        Fail(r, InvalidArgument(fmt::format("request {}: prefill rank {} ended with pieces for decode rank {} missing",
                                            r.id, part->rank, d)));
      }
    }
    r.rank_state[part->rank] = 2;
    ++r.ranks_ended;
    status = r.closed ? NotFound(fmt::format("request {} was cancelled or timed out on decode", r.id)) : r.error;
  }
  parts.erase(part);
  std::lock_guard<std::mutex> lock(mu);
  changed.notify_all();
  return status;
}

Status HandoffReceiver::Expect(uint64_t request_id, uint64_t first_token, uint64_t end_token,
                               std::vector<DecodeTarget> targets) {
  Impl& impl = *impl_;
  auto plan = PlanHandoff(impl.prefill, impl.decode, first_token, end_token, {impl.options.max_write_bytes});
  if (!plan.ok()) return plan.status();
  if (targets.size() != impl.decode.dcp_ranks) {
    return InvalidArgument(fmt::format("request {}: {} decode targets for {} DCP ranks", request_id, targets.size(),
                                       impl.decode.dcp_ranks));
  }
  auto r = std::make_shared<Request>();
  r->id = request_id;
  r->plan = std::move(plan).value();
  r->targets = std::move(targets);
  r->deadline = Clock::now() + impl.options.request_timeout;
  r->rank_state.assign(impl.prefill.num_ranks(), 0);
  r->landed.resize(r->plan.pairs.size());
  for (size_t i = 0; i < r->plan.pairs.size(); ++i) {
    const PairPlan& pair = r->plan.pairs[i];
    // Every block the scatter would touch is checked now: a bad table is the caller's error.
    if (r->targets[pair.decode_rank].cache == nullptr) return InvalidArgument("a decode target has no cache");
    Status ok = CheckScatter(pair, *r->targets[pair.decode_rank].cache, r->targets[pair.decode_rank].table);
    if (!ok.ok()) return InvalidArgument(fmt::format("request {} decode rank {}: {}", request_id, pair.decode_rank, ok.message()));
    r->landed[i].assign(pair.writes.size(), false);
    r->pieces_left += pair.writes.size();
  }
  r->device_tables.resize(r->targets.size());
  r->device_scatters.assign(r->targets.size(), nullptr);
  for (uint32_t d = 0; d < r->targets.size(); ++d) {
    const DecodeTarget& t = r->targets[d];
    if (t.cuda_device == -1) continue;
    if (t.cuda_device < -1) {
      return InvalidArgument(fmt::format("request {} decode rank {}: cuda_device {} (use -1 for host memory)",
                                         request_id, d, t.cuda_device));
    }
    auto scatter = impl.DeviceScatterFor(t.cuda_device);
    if (!scatter.ok()) {
      return Status(scatter.status().code(), fmt::format("request {} decode rank {}: {}", request_id, d,
                                                         scatter.status().message()));
    }
    // Also checks that the planes are memory of that GPU.
    auto table = DeviceKvTable::Upload(*t.cache, t.table, t.cuda_device);
    if (!table.ok()) {
      return Status(table.status().code(), fmt::format("request {} decode rank {}: {}", request_id, d,
                                                       table.status().message()));
    }
    r->device_tables[d] = std::move(table).value();
    r->device_scatters[d] = *scatter;
  }
  std::lock_guard<std::mutex> lock(impl.mu);
  if (!impl.requests.emplace(request_id, std::move(r)).second) {
    return AlreadyExists(fmt::format("request {} is already expected", request_id));
  }
  return Status::Ok();
}

std::optional<Status> HandoffReceiver::Poll(uint64_t request_id) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.mu);
  auto it = impl.requests.find(request_id);
  if (it == impl.requests.end()) return NotFound(fmt::format("request {} is not expected", request_id));
  const std::shared_ptr<Request> keep = it->second;  // outlives the erase below, and request_lock
  Request& r = *keep;
  std::lock_guard<std::mutex> request_lock(r.mu);
  // A piece still being scattered may still write the blocks (and, on success, complete the
  // request): not answerable before it is done.
  if (r.scattering > 0) return std::nullopt;
  Status answer;
  if (!r.error.ok()) {
    answer = r.error;
  } else if (r.ranks_ended == r.rank_state.size() && r.pieces_left == 0) {
    answer = Status::Ok();
  } else if (Clock::now() >= r.deadline) {
    answer = Timeout(fmt::format("request {} was not handed off within {} ms", request_id,
                                 impl.options.request_timeout.count()));
  } else {
    return std::nullopt;
  }
  r.closed = true;
  ++(answer.ok() ? impl.stats.ready_requests : impl.stats.failed_requests);
  impl.requests.erase(it);
  return answer;
}

Status HandoffReceiver::Wait(uint64_t request_id, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (std::optional<Status> answer = Poll(request_id)) return *answer;
    std::unique_lock<std::mutex> lock(impl_->mu);
    if (Clock::now() >= deadline) break;
    // Woken by END or a lost connection; the cap lets a request deadline be noticed.
    impl_->changed.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
  }
  Cancel(request_id);
  return Timeout(fmt::format("request {} was not ready by the caller's deadline", request_id));
}

void HandoffReceiver::Cancel(uint64_t request_id) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.mu);
  auto it = impl.requests.find(request_id);
  if (it == impl.requests.end()) return;
  const std::shared_ptr<Request> keep = it->second;  // outlives the erase below, and request_lock
  std::unique_lock<std::mutex> request_lock(keep->mu);
  keep->closed = true;  // no new scatter starts; wait for those running (they need only keep->mu)
  keep->idle.wait(request_lock, [&] { return keep->scattering == 0; });
  ++impl.stats.failed_requests;
  impl.requests.erase(it);
}

Result<DeviceScatter*> HandoffReceiver::Impl::DeviceScatterFor(int device) {
  std::lock_guard<std::mutex> lock(device_mu);
  auto it = device_scatters.find(device);
  if (it != device_scatters.end()) return it->second.get();
  auto scatter = DeviceScatter::Create(device, options.max_write_bytes, kDeviceBounceSlots);
  if (!scatter.ok()) return scatter.status();
  if (!pin_tried) {  // once: the registration is portable, every GPU's copies DMA from it
    pin_tried = true;
    auto pinned = PinnedHostRange::Register(landing->data(), landing->size());
    if (pinned.ok()) {
      pinned_landing = std::move(pinned).value();
    } else {
      spdlog::warn("handoff receiver: landing segment not page-locked, host -> device copies will be slower: {}",
                   pinned.status().ToString());
    }
  }
  DeviceScatter* raw = scatter->get();
  device_scatters.emplace(device, std::move(scatter).value());
  return raw;
}

HandoffReceiverStats HandoffReceiver::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace kvpool::handoff
