#include "store/storage_service.h"

#include "http/metrics_endpoint.h"
#include "store/store_metrics_text.h"

#include "etcd/etcd_client.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/byte_size.h"
#include "common/clock.h"
#include "transfer/transfer_engine.h"

namespace kvpool::store {
namespace {

using std::chrono::milliseconds;

std::string RandomStoreId() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  return fmt::format("store-{:012x}", dist(rd) & 0xffff'ffff'ffffull);
}

// The store id becomes part of a file name: keep it to characters that cannot escape the folder.
bool ValidStoreId(const std::string& id) {
  return !id.empty() && id.size() <= 64 && id != "." && id != ".." &&
         std::all_of(id.begin(), id.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

// Splits "host:port", "[v6]:port" or ":port". False when there is no port.
bool SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  if (!address.empty() && address[0] == '[') {
    auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return false;
    }
    *host = address.substr(1, close - 1);
    *port = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) return false;
    *host = address.substr(0, colon);
    *port = address.substr(colon + 1);
  }
  return !port->empty();
}

// What clients dial: the advertised host (or the listen host, or loopback for a wildcard) and
// the port the server actually bound.
std::string AdvertisedAddress(const std::string& advertise_host, const std::string& listen,
                              const std::string& bound) {
  std::string listen_host, bound_host, port, ignored;
  SplitHostPort(listen, &listen_host, &ignored);
  SplitHostPort(bound, &bound_host, &port);
  std::string host = advertise_host.empty() ? listen_host : advertise_host;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.front() == '[') return fmt::format("{}:{}", host, port);  // already bracketed
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Status ValidateOptions(const StorageOptions& o) {
  if (o.master_address.empty() == o.etcd.empty())
    return InvalidArgument("storage service needs a master address or etcd endpoints (one of them)");
  if (!o.etcd.empty()) {
    if (auto etcd = etcd::EtcdClient::Create(o.etcd); !etcd.ok()) return etcd.status();
  }
  if (o.memory_bytes == 0) return InvalidArgument("storage service needs memory_bytes > 0");
  if (!o.etcd.empty() && o.registration_ttl < std::chrono::seconds(2))
    return InvalidArgument("registration_ttl must be at least 2 s (etcd's shortest lease)");
  if (o.heartbeat_interval.count() <= 0) {
    return InvalidArgument("heartbeat_interval must be > 0");
  }
  if (o.rpc_timeout.count() <= 0) return InvalidArgument("rpc_timeout must be > 0");
  if (o.io_threads <= 0) return InvalidArgument("io_threads must be > 0");
  if (o.shm_socket_dir.empty()) return InvalidArgument("shm_socket_dir must not be empty");
  if (!o.ssd_path.empty() && !o.keep_index) {
    return InvalidArgument("an SSD tier needs the store to keep its index (the master's journal carries the demotions)");
  }
  if (!o.store_id.empty() && !ValidStoreId(o.store_id)) {
    return InvalidArgument(fmt::format(
        "store id '{}' must be 1-64 letters, digits, '-', '_' or '.'", o.store_id));
  }
  std::string host, port;
  if (!SplitHostPort(o.tcp_listen, &host, &port)) {
    return InvalidArgument(fmt::format("tcp_listen '{}' is not host:port", o.tcp_listen));
  }
  return Status::Ok();
}

}  // namespace

StorageService::StorageService(const StorageOptions& options, std::string store_id)
    : options_(options), store_id_(std::move(store_id)) {}

Result<std::unique_ptr<StorageService>> StorageService::Start(const StorageOptions& options) {
  KVPOOL_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<StorageService> service(
      new StorageService(options, options.store_id.empty() ? RandomStoreId() : options.store_id));
  // From here on an early return destroys `service`, whose Stop() undoes whatever ran.

  SegmentMemoryOptions memory_options;
  memory_options.size_bytes = options.memory_bytes;
  memory_options.use_huge_pages = options.use_huge_pages;
  memory_options.lock_memory = options.lock_memory;
  memory_options.name = "kvpool-" + service->store_id_;
  auto memory = SegmentMemory::Allocate(memory_options);
  if (!memory.ok()) {
    return Status(memory.status().code(),
                  fmt::format("cannot allocate the {} segment: {}",
                              FormatByteSize(options.memory_bytes), memory.status().message()));
  }
  service->memory_ = std::move(memory).value();
  spdlog::info("store {}: segment {}", service->store_id_, service->memory_->Describe());

  if (!options.ssd_path.empty()) {
    auto ssd = TierMover::Open({options.ssd_path, options.ssd_bytes, options.ssd_max_object_bytes, options.ssd_demote_inline},
                               {static_cast<std::byte*>(service->memory_->base()), service->memory_->size()});
    if (!ssd.ok()) return ssd.status();
    service->ssd_ = std::move(ssd).value();
    const ssd::SsdTierStats tier = service->ssd_->stats();
    spdlog::info("store {}: SSD tier {}: {} for objects up to {}, {} objects on it", service->store_id_,
                 options.ssd_path, FormatByteSize(tier.capacity_bytes), FormatByteSize(options.ssd_max_object_bytes),
                 tier.objects);
  }

  transfer::SegmentServerOptions server_options;
  server_options.tcp_listen = options.tcp_listen;
  server_options.shm_socket_path =
      fmt::format("{}/kvpool-{}.sock", options.shm_socket_dir, service->store_id_);
  server_options.io_threads = options.io_threads;
  server_options.secret = options.credentials.secret;
  server_options.ucx = options.ucx;
  auto server = transfer::SegmentServer::Start(server_options);
  if (!server.ok()) {
    return Status(server.status().code(), fmt::format("cannot start the segment server: {}",
                                                      server.status().message()));
  }
  service->server_ = std::move(server).value();
  service->shm_socket_path_ = service->server_->shm_socket_path();
  service->tcp_address_ = AdvertisedAddress(options.advertise_host, options.tcp_listen,
                                            service->server_->tcp_address());

  proto::SegmentEndpoint& endpoint = service->endpoint_;
  endpoint.set_store_id(service->store_id_);
  endpoint.set_host_id(transfer::LocalHostId());
  endpoint.set_tcp_address(service->tcp_address_);
  endpoint.set_shm_socket(service->shm_socket_path_);
  endpoint.set_size(service->memory_->size());
  if (service->ssd_) {
    endpoint.set_ssd_capacity_bytes(service->ssd_->capacity_bytes());
    endpoint.set_ssd_max_value_bytes(service->ssd_->max_value_bytes());
  }

  service->master_ = std::make_unique<MountClient>(options.master_address, options.etcd, options.part,
                                                 options.rpc_timeout, options.credentials);
  KVPOOL_RETURN_IF_ERROR(service->MountAndServe());
  if (!options.etcd.empty() && options.keep_index) {
    // Registered once mounted, and only with an index to rejoin with: a new leader waits only
    // for stores that bring objects back.
    service->registration_ = std::make_unique<etcd::StoreRegistration>(
        std::shared_ptr<etcd::EtcdClient>(*etcd::EtcdClient::Create(options.etcd)), options.part, service->store_id_,
        service->tcp_address_, options.registration_ttl);
  }
  service->heartbeat_ = options.clock->Every(options.heartbeat_interval, [s = service.get()] { s->Heartbeat(); });
  if (options.keep_index) service->index_thread_ = std::thread([s = service.get()] { s->IndexLoop(); });
  if (!options.metrics_listen.empty()) {
    StorageService* s = service.get();
    auto metrics = http::MetricsEndpoint::StartMetricsAndHealth(
        options.metrics_listen, [s](std::string* body) { AppendStoreMetrics(*s, body); },
        [s] { return std::string(s->segment_id() != 0 ? "ok\n" : "ok (not mounted)\n"); });
    if (!metrics.ok()) return metrics.status();
    service->metrics_ = std::move(metrics).value();
  }
  return service;
}

int StorageService::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

StorageService::~StorageService() { Stop(); }

Status StorageService::MountAndServe() {
  // A fresh mount: the master has nothing in the segment, and neither has its index.
  index_.Clear();
  proto::MountSegmentRequest request;
  *request.mutable_segment() = endpoint_;
  request.set_keeps_index(options_.keep_index);
  if (ssd_) ssd_->AppendObjects(&request);  // what the tier kept across a restart
  auto grant = master_->Mount(std::move(request), ssd_ ? options_.rejoin_timeout : options_.rpc_timeout);
  if (!grant.ok()) return grant.status();
  ++mount_generation_;
  transfer::ServedSegment served{grant->segment_id, memory_->base(), memory_->size(), memory_->fd()};
  if (ssd_) {
    served.tier_fd = ssd_->file().fd();
    served.tier_size = ssd_->file().size();
  }
  server_->Serve(served);
  segment_id_ = grant->segment_id;
  {
    std::lock_guard lock(mu_);
    max_lease_ = grant->max_lease;
  }
  spdlog::info("store {}: segment {} mounted on master {} (tcp {}, shm {}; heartbeat ttl {} ms, "
               "max lease {} ms)",
               store_id_, grant->segment_id, master_->master_address(), tcp_address_,
               shm_socket_path_, grant->heartbeat_ttl.count(), grant->max_lease.count());
  if (grant->heartbeat_ttl.count() > 0 && options_.heartbeat_interval * 2 > grant->heartbeat_ttl) {
    spdlog::warn("store {}: heartbeat interval {} ms is more than half the master's ttl {} ms; "
                 "one late beat may get the segment dropped",
                 store_id_, options_.heartbeat_interval.count(), grant->heartbeat_ttl.count());
  }
  return Status::Ok();
}

Status StorageService::Rejoin(uint64_t id) {
  proto::MountSegmentRequest request;
  *request.mutable_segment() = endpoint_;
  request.mutable_segment()->set_segment_id(id);
  request.set_keeps_index(true);
  request.set_rejoin_segment_id(id);
  index_.Snapshot(&request);
  if (ssd_) ssd_->AppendObjects(&request);
  const int entries = request.entries_size();
  auto grant = master_->Mount(std::move(request), options_.rejoin_timeout);
  if (!grant.ok()) return grant.status();
  if (grant->segment_id != id) {
    return Internal(fmt::format("master {} took segment {} back under id {}",
                                master_->master_address(), id, grant->segment_id));
  }
  ++mount_generation_;
  ++rejoins_;
  {
    std::lock_guard lock(mu_);
    max_lease_ = grant->max_lease;
  }
  spdlog::info("store {}: master {} did not know segment {}; rejoined with its index "
               "({} entries, {} objects taken back)",
               store_id_, master_->master_address(), id, entries, grant->rebuilt_objects);
  return Status::Ok();
}

void StorageService::IndexLoop() {
  uint64_t generation = 0;
  uint64_t journal_id = 0;
  uint64_t applied = 0;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const uint64_t id = segment_id_;
    if (id == 0) {
      wake_.wait_for(lock, milliseconds(100), [this] { return stopping_; });
      continue;
    }
    if (mount_generation_ != generation) {
      generation = mount_generation_;
      journal_id = 0;
      applied = 0;
    }
    lock.unlock();
    std::vector<proto::TierReport> reports = ssd_ ? ssd_->TakeReports() : std::vector<proto::TierReport>{};
    auto reply = master_->PullIndex(id, journal_id, applied, reports);
    if (!reply.ok() && ssd_) ssd_->PutBackReports(std::move(reports));
    if (reply.ok() && generation == mount_generation_) {
      if (reply->journal_id() != journal_id) {
        // A journal new to us: what it numbered before first_seq was confirmed by nobody else.
        journal_id = reply->journal_id();
        applied = reply->first_seq() > 0 ? reply->first_seq() - 1 : 0;
      }
      applied = ApplyRecords(*reply, applied);
      if (ssd_) ssd_->DemoteQueued();  // with ssd_demote_inline: done before they are confirmed
    }
    lock.lock();
    // A master that is away or does not know the segment: the heartbeat timer deals with
    // it; ask again shortly.
    if (!reply.ok()) wake_.wait_for(lock, milliseconds(100), [this] { return stopping_; });
  }
}

uint64_t StorageService::ApplyRecords(const proto::PullIndexReply& reply, uint64_t applied) {
  const int64_t now = WallClockMs();
  const int count = reply.records_size();
  for (int i = 0; i < count; ++i) {
    const uint64_t seq = reply.first_seq() + static_cast<uint64_t>(i);
    if (seq <= applied) continue;  // a resend of what we applied already
    if (seq != applied + 1) break;  // a gap: ask again from what we have
    const proto::IndexRecord& record = reply.records(i);
    switch (record.op()) {
      case proto::IndexRecord::DEMOTE:
        if (ssd_) ssd_->Demote(record.entry());
        break;
      case proto::IndexRecord::DROP_SSD:
        if (ssd_) ssd_->DropFromSsd(record.entry().key());
        break;
      case proto::IndexRecord::TOUCH_SSD:
        if (ssd_) ssd_->MarkRead(record.entry().key());
        break;
      case proto::IndexRecord::PROMOTE: {
        // A run of loads goes to the tier at once, several reads in flight.
        int end = i;
        while (end < count && reply.records(end).op() == proto::IndexRecord::PROMOTE) ++end;
        std::vector<const proto::IndexEntry*> entries;
        for (int k = i; k < end; ++k) entries.push_back(&reply.records(k).entry());
        const std::vector<bool> loaded = ssd_ ? ssd_->Promote(entries) : std::vector<bool>(entries.size(), false);
        for (size_t k = 0; k < entries.size(); ++k) {
          if (!loaded[k]) continue;
          proto::IndexRecord place;  // the loaded object is a complete one of the segment now
          place.set_op(proto::IndexRecord::PLACE);
          *place.mutable_entry() = *entries[k];
          place.mutable_entry()->set_complete(true);
          place.mutable_entry()->set_completed_unix_ms(now);
          index_.Apply(place, now);
        }
        i = end - 1;
        applied = reply.first_seq() + static_cast<uint64_t>(i);
        continue;
      }
      default:
        index_.Apply(record, now);
    }
    applied = seq;
  }
  return applied;
}

void StorageService::Heartbeat() {
  const uint64_t id = segment_id_;
  if (id != 0) {
    Beat(id);
    return;
  }
  {
    // Dropped: the remount is due once every lease on the old id has expired.
    std::lock_guard lock(mu_);
    if (options_.clock->NowNs() < remount_not_before_ns_) return;
  }
  if (Status mounted = MountAndServe(); mounted.ok()) {
    ++remounts_;
    NoteMasterReachable(true, mounted);
  } else {
    NoteMasterReachable(false, mounted);
    std::lock_guard lock(mu_);
    remount_not_before_ns_ = options_.clock->NowNs() + std::chrono::nanoseconds(options_.heartbeat_interval).count();
  }
}

void StorageService::Beat(uint64_t id) {
  auto unknown = master_->Heartbeat(store_id_, {id});
  // Following etcd, a master that does not answer may have been replaced: beat the new
  // leader at once (it will not know the segment, and the store rejoins it below).
  if (!unknown.ok() && master_->FollowLeader()) {
    spdlog::info("store {}: following the new leader of part {} at {}", store_id_, options_.part,
                 master_->master_address());
    unknown = master_->Heartbeat(store_id_, {id});
  }
  if (!unknown.ok()) {
    NoteMasterReachable(false, unknown.status());
    return;
  }
  NoteMasterReachable(true, Status::Ok());
  if (std::find(unknown->begin(), unknown->end(), id) == unknown->end()) return;

  // The master does not know the segment: give it back with its index and serve on.
  Status rejoined = options_.keep_index ? Rejoin(id) : Unavailable("this store keeps no index");
  if (rejoined.ok()) return;
  if (options_.keep_index &&
      (rejoined.code() == StatusCode::kUnavailable || rejoined.code() == StatusCode::kTimeout)) {
    NoteMasterReachable(false, rejoined);  // asked again on the next beat
    return;
  }

  // Refused: the master's metadata for `id` is gone for good. Refuse tcp requests for it now;
  // same-host clients read through their own mapping, so wait out every lease before the
  // memory may be handed out again under a new id (invariant 3).
  spdlog::warn("store {}: master {} refused segment {} back ({})", store_id_,
               master_->master_address(), id, rejoined.ToString());
  server_->Withdraw(id);
  index_.Clear();
  segment_id_ = 0;
  std::lock_guard lock(mu_);
  remount_not_before_ns_ = options_.clock->NowNs() + std::chrono::nanoseconds(max_lease_).count();
  spdlog::warn("store {}: master {} dropped segment {}; withdrawn, remounting in {} ms once "
               "every lease on it has expired",
               store_id_, master_->master_address(), id, max_lease_.count());
}

void StorageService::NoteMasterReachable(bool reachable, const Status& why) {
  if (reachable == master_reachable_) return;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // calls cut short by Stop() say nothing about the master
  }
  master_reachable_ = reachable;
  if (reachable) {
    spdlog::info("store {}: master {} answers again", store_id_, master_->master_address());
  } else {
    spdlog::warn("store {}: master {} not answering ({}); retrying every {} ms", store_id_,
                 master_->master_address(), why.ToString(), options_.heartbeat_interval.count());
  }
}

void StorageService::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (metrics_) metrics_->Shutdown();  // it reads what the rest of Stop takes down
  registration_.reset();  // first: a leader elected meanwhile need not wait for this store
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (master_) master_->Interrupt();
  heartbeat_.reset();  // waits for a beat in progress
  if (index_thread_.joinable()) index_thread_.join();

  // Unmount first so the master stops placing objects here, then stop serving.
  const uint64_t id = segment_id_.exchange(0);
  if (id != 0) {
    Status unmounted = master_->Unmount(id);
    if (unmounted.ok()) {
      spdlog::info("store {}: segment {} unmounted", store_id_, id);
    } else {
      spdlog::warn("store {}: could not unmount segment {} ({}); the master drops it when its "
                   "heartbeat ttl runs out",
                   store_id_, id, unmounted.ToString());
    }
    server_->Withdraw(id);
  }
  if (server_) server_->Stop();
  if (!shm_socket_path_.empty() && ::unlink(shm_socket_path_.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("store {}: cannot remove {}: {}", store_id_, shm_socket_path_,
                 std::strerror(errno));
  }
}

}  // namespace kvpool::store
