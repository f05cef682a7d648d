#include "client/master_directory.h"

#include <grpcpp/grpcpp.h>

#include <thread>

#include "proto/rpc_security.h"

namespace kvpool::client {

// gRPC backs off up to 120 s between reconnects by default; a part whose link came back must
// be used again within a second. Pings notice a link that died under an open connection, so
// later calls fail at once instead of each waiting out its deadline.
std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address, const proto::RpcCredentials& credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 4000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 4000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return proto::SecureChannel(address, args, credentials);
}

Result<std::unique_ptr<MasterDirectory>> MasterDirectory::Create(const PoolParts& pool,
                                                                 std::chrono::milliseconds timeout,
                                                                 proto::RpcCredentials credentials) {
  std::unique_ptr<MasterDirectory> directory(new MasterDirectory());
  directory->credentials_ = std::move(credentials);
  directory->parts_.resize(pool.size());
  if (pool.etcd.empty()) {
    for (uint32_t k = 0; k < pool.size(); ++k) directory->Point(k, pool.masters[k]);
    return directory;
  }
  auto etcd = etcd::EtcdClient::Create(pool.etcd);
  if (!etcd.ok()) return etcd.status();
  std::shared_ptr<etcd::EtcdClient> shared = *std::move(etcd);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (uint32_t k = 0; k < pool.size(); ++k) {
    directory->leaders_.push_back(std::make_unique<etcd::PartLeader>(shared, k));
    // A client started during a failover waits for the new leader rather than fail.
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      auto leader = directory->leaders_[k]->Find(std::max(left, std::chrono::milliseconds(100)));
      if (leader.ok()) {
        directory->Point(k, leader->value);
        break;
      }
      if (left.count() <= 0 || leader.status().code() == StatusCode::kInvalidArgument) return leader.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return directory;
}

void MasterDirectory::Point(uint32_t part, const std::string& address) {
  parts_[part] = {address, std::make_shared<Stub>(MasterChannel(address, credentials_))};
}

std::vector<std::shared_ptr<MasterDirectory::Stub>> MasterDirectory::Stubs() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Stub>> stubs;
  stubs.reserve(parts_.size());
  for (const Part& p : parts_) stubs.push_back(p.stub);
  return stubs;
}

std::string MasterDirectory::Address(uint32_t part) const {
  std::lock_guard lock(mu_);
  return parts_[part].address;
}

bool MasterDirectory::Refresh(uint32_t part, std::chrono::milliseconds timeout) {
  if (leaders_.empty()) return false;
  auto leader = leaders_[part]->Find(timeout);
  if (!leader.ok()) return false;
  std::lock_guard lock(mu_);
  if (parts_[part].address == leader->value) return false;
  Point(part, leader->value);
  return true;
}

}  // namespace kvpool::client
