#include "etcd/etcd_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "common/host_port.h"
#include "etcd/etcd_election.grpc.pb.h"
#include "etcd/etcd_kv.grpc.pb.h"
#include "etcd/etcd_lease.grpc.pb.h"

namespace kvpool::etcd {
namespace {

using SystemTime = std::chrono::system_clock::time_point;

// A campaign that lost its endpoint waits this long before it tries the next one.
constexpr std::chrono::milliseconds kCampaignRetryPause{200};

Status FromGrpc(const grpc::Status& s, std::string_view what, std::string_view endpoint) {
  const std::string message = fmt::format("etcd {} at {}: {}", what, endpoint, s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(message);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Timeout(message);
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgument(message);
    default:
      // etcd's election service answers "election: no leader" with code UNKNOWN.
      if (s.error_message().find("no leader") != std::string::npos) return NotFound(message);
      return Internal(message);
  }
}

bool Unreachable(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimeout;
}

Result<std::string> ParseEndpoint(std::string_view text) {
  if (text.starts_with("https://"))
    return InvalidArgument(fmt::format("etcd endpoint '{}': TLS is not supported; use http:// on a private network",
                                       text));
  if (text.starts_with("http://")) text.remove_prefix(7);
  if (text.ends_with("/")) text.remove_suffix(1);
  if (Status s = CheckHostPort(text); !s.ok())
    return InvalidArgument(fmt::format("etcd endpoint '{}': {}", text, s.message()));
  return std::string(text);
}

}  // namespace

void Canceller::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (context_) context_->TryCancel();
  wake_.notify_all();
}

bool Canceller::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool Canceller::Enter(grpc::ClientContext* context) {
  std::lock_guard lock(mu_);
  if (cancelled_) return false;
  context_ = context;
  return true;
}

void Canceller::Leave() {
  std::lock_guard lock(mu_);
  context_ = nullptr;
}

bool Canceller::CancelledWithin(std::chrono::milliseconds pause) {
  std::unique_lock lock(mu_);
  return wake_.wait_for(lock, pause, [this] { return cancelled_; });
}

EtcdClient::EtcdClient(std::string spec, std::vector<std::string> endpoints)
    : spec_(std::move(spec)), endpoints_(std::move(endpoints)), channels_(endpoints_.size()) {}

EtcdClient::~EtcdClient() = default;

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(std::string_view endpoints) {
  std::vector<std::string> parsed;
  std::string_view rest = endpoints;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    auto endpoint = ParseEndpoint(rest.substr(0, comma));
    if (!endpoint.ok()) return endpoint.status();
    parsed.push_back(*std::move(endpoint));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (parsed.empty()) return InvalidArgument("no etcd endpoint given (expected HOST:PORT[,HOST:PORT...])");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::string(endpoints), std::move(parsed)));
}

std::shared_ptr<grpc::Channel> EtcdClient::Channel(size_t endpoint) {
  std::lock_guard lock(mu_);
  if (!channels_[endpoint]) {
    // A restarted etcd must be used again within a fraction of a lease, not after gRPC's
    // default backoff of up to two minutes. (The minimum backoff is also how long one
    // connection attempt may take: etcd sniffs each connection's protocol before answering,
    // which can take longer than 100 ms on a busy machine.)
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channels_[endpoint] = grpc::CreateCustomChannel(endpoints_[endpoint], grpc::InsecureChannelCredentials(), args);
  }
  return channels_[endpoint];
}

void EtcdClient::DropChannel(size_t endpoint) {
  std::lock_guard lock(mu_);
  channels_[endpoint].reset();
}

Status EtcdClient::OnSomeEndpoint(Millis timeout, const Attempt& call) {
  const SystemTime deadline = std::chrono::system_clock::now() + timeout;
  const size_t n = endpoints_.size();
  // Each endpoint gets its share of the time, so one that swallows packets leaves time for
  // the others; a refused connection fails at once and gives its share on.
  const auto share = std::max<std::chrono::system_clock::duration>(timeout / n, Millis(100));
  Status last = Unavailable("etcd: no endpoint tried");
  const size_t first = preferred_.load();
  for (size_t i = 0; i < n; ++i) {
    const size_t e = (first + i) % n;
    const SystemTime now = std::chrono::system_clock::now();
    if (now >= deadline && i > 0) break;
    last = call(Channel(e), endpoints_[e], std::min(deadline, now + share));
    if (!Unreachable(last)) {
      preferred_.store(e);
      return last;
    }
    DropChannel(e);
  }
  return last;
}

Result<EtcdClient::Lease> EtcdClient::GrantLease(std::chrono::seconds ttl, Millis timeout) {
  Lease lease;
  Status s = OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    etcdserverpb::LeaseGrantRequest request;
    request.set_ttl(ttl.count());
    etcdserverpb::LeaseGrantResponse reply;
    auto stub = etcdserverpb::Lease::NewStub(channel);
    Status status = FromGrpc(stub->LeaseGrant(&context, request, &reply), "LeaseGrant", endpoint);
    if (status.ok() && !reply.error().empty()) status = Internal("etcd LeaseGrant: " + reply.error());
    if (status.ok() && (reply.id() == 0 || reply.ttl() <= 0))
      status = Internal(fmt::format("etcd LeaseGrant returned lease {} with ttl {}", reply.id(), reply.ttl()));
    lease = {reply.id(), std::chrono::seconds(reply.ttl())};
    return status;
  });
  if (!s.ok()) return s;
  return lease;
}

Result<std::chrono::seconds> EtcdClient::KeepAlive(int64_t lease, Millis timeout) {
  std::chrono::seconds ttl{0};
  Status s = OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    // One short stream per renewal: each renewal then has its own deadline, and a stream
    // never outlives the endpoint it was opened on.
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto stub = etcdserverpb::Lease::NewStub(channel);
    auto stream = stub->LeaseKeepAlive(&context);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    etcdserverpb::LeaseKeepAliveResponse reply;
    const bool answered = stream->Write(request) && stream->Read(&reply);
    stream->WritesDone();
    if (!answered) context.TryCancel();
    const grpc::Status finished = stream->Finish();
    if (!answered) {
      return finished.ok() ? Unavailable("etcd LeaseKeepAlive: the stream closed without an answer")
                           : FromGrpc(finished, "LeaseKeepAlive", endpoint);
    }
    if (reply.ttl() <= 0) return NotFound(fmt::format("etcd lease {:x} has expired", lease));
    ttl = std::chrono::seconds(reply.ttl());
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return ttl;
}

Status EtcdClient::RevokeLease(int64_t lease, Millis timeout) {
  return OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto stub = etcdserverpb::Lease::NewStub(channel);
    etcdserverpb::LeaseRevokeRequest request;
    request.set_id(lease);
    etcdserverpb::LeaseRevokeResponse reply;
    return FromGrpc(stub->LeaseRevoke(&context, request, &reply), "LeaseRevoke", endpoint);
  });
}

Result<LeaderKey> EtcdClient::Campaign(std::string_view election, int64_t lease, std::string_view value,
                                       Canceller* cancel) {
  for (size_t attempt = 0;; ++attempt) {
    const size_t e = (preferred_.load() + attempt) % endpoints_.size();
    grpc::ClientContext context;
    if (!cancel->Enter(&context)) return Unavailable("etcd campaign cancelled: the master is stopping");
    v3electionpb::CampaignRequest request;
    request.set_name(std::string(election));
    request.set_lease(lease);
    request.set_value(std::string(value));
    v3electionpb::CampaignResponse reply;
    auto stub = v3electionpb::Election::NewStub(Channel(e));
    const grpc::Status s = stub->Campaign(&context, request, &reply);
    cancel->Leave();
    if (cancel->cancelled()) return Unavailable("etcd campaign cancelled: the master is stopping");
    Status status = FromGrpc(s, "Campaign", endpoints_[e]);
    if (status.ok()) {
      preferred_.store(e);
      const auto& l = reply.leader();
      if (l.rev() <= 0) return Internal("etcd Campaign answered without a leader key");
      return LeaderKey{l.name(), l.key(), l.rev(), l.lease()};
    }
    if (!Unreachable(status)) return status;
    if (cancel->CancelledWithin(kCampaignRetryPause)) return Unavailable("etcd campaign cancelled: the master is stopping");
  }
}

Result<Leader> EtcdClient::GetLeader(std::string_view election, Millis timeout) {
  Leader leader;
  Status s = OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto stub = v3electionpb::Election::NewStub(channel);
    v3electionpb::LeaderRequest request;
    request.set_name(std::string(election));
    v3electionpb::LeaderResponse reply;
    Status status = FromGrpc(stub->Leader(&context, request, &reply), "Leader", endpoint);
    if (status.ok() && !reply.has_kv()) status = NotFound(fmt::format("nobody leads {}", election));
    leader = {reply.kv().value(), reply.kv().create_revision()};
    return status;
  });
  if (!s.ok()) return s;
  return leader;
}

Status EtcdClient::Resign(const LeaderKey& leader, Millis timeout) {
  return OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    auto stub = v3electionpb::Election::NewStub(channel);
    v3electionpb::ResignRequest request;
    auto* key = request.mutable_leader();
    key->set_name(leader.name);
    key->set_key(leader.key);
    key->set_rev(leader.term);
    key->set_lease(leader.lease);
    v3electionpb::ResignResponse reply;
    return FromGrpc(stub->Resign(&context, request, &reply), "Resign", endpoint);
  });
}

Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease, Millis timeout) {
  return OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    etcdserverpb::PutRequest request;
    request.set_key(std::string(key));
    request.set_value(std::string(value));
    request.set_lease(lease);
    etcdserverpb::PutResponse reply;
    return FromGrpc(etcdserverpb::KV::NewStub(channel)->Put(&context, request, &reply), "Put", endpoint);
  });
}

Result<std::vector<std::pair<std::string, std::string>>> EtcdClient::List(std::string_view prefix, Millis timeout) {
  if (prefix.empty() || static_cast<unsigned char>(prefix.back()) == 0xff)
    return InvalidArgument("etcd List needs a prefix not ending in byte 0xff");
  std::string range_end(prefix);
  range_end.back() = static_cast<char>(static_cast<unsigned char>(range_end.back()) + 1);
  std::vector<std::pair<std::string, std::string>> found;
  Status s = OnSomeEndpoint(timeout, [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& endpoint, SystemTime deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    etcdserverpb::RangeRequest request;
    request.set_key(std::string(prefix));
    request.set_range_end(range_end);
    etcdserverpb::RangeResponse reply;
    Status status = FromGrpc(etcdserverpb::KV::NewStub(channel)->Range(&context, request, &reply), "Range", endpoint);
    found.clear();
    for (const auto& kv : reply.kvs()) found.emplace_back(kv.key(), kv.value());
    return status;
  });
  if (!s.ok()) return s;
  return found;
}

}  // namespace kvpool::etcd
