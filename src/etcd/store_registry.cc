#include "etcd/store_registry.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvpool::etcd {

std::string StoreRegistryPrefix(uint32_t part) { return fmt::format("kvpool/stores/{}/", part); }

Result<std::set<std::string>> RegisteredStores(EtcdClient& etcd, uint32_t part, std::chrono::milliseconds timeout) {
  const std::string prefix = StoreRegistryPrefix(part);
  auto listed = etcd.List(prefix, timeout);
  if (!listed.ok()) return listed.status();
  std::set<std::string> stores;
  for (const auto& [key, value] : *listed) stores.insert(key.substr(prefix.size()));
  return stores;
}

StoreRegistration::StoreRegistration(std::shared_ptr<EtcdClient> etcd, uint32_t part, std::string store_id,
                                     std::string value, std::chrono::seconds ttl)
    : etcd_(std::move(etcd)),
      key_(StoreRegistryPrefix(part) + store_id),
      value_(std::move(value)),
      ttl_(ttl),
      quarter_(std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 4) {
  thread_ = std::thread([this] { Run(); });
}

StoreRegistration::~StoreRegistration() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (lease_ != 0) {
    if (Status s = etcd_->RevokeLease(lease_, std::chrono::seconds(1)); !s.ok())
      spdlog::warn("{}: could not leave the registry ({}); it expires in {} s", key_, s.ToString(), ttl_.count());
  }
}

bool StoreRegistration::registered() const { return registered_.load(); }

void StoreRegistration::Run() {
  bool failing = false;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const Status s = registered_.load() ? Renew() : Register();
    if (!s.ok() && !failing) spdlog::warn("{}: cannot stay registered in etcd ({}); retrying", key_, s.ToString());
    if (s.ok() && failing) spdlog::info("{}: registered in etcd again", key_);
    failing = !s.ok();
    lock.lock();
    wake_.wait_for(lock, quarter_, [this] { return stopping_; });
  }
}

Status StoreRegistration::Renew() {
  auto renewed = etcd_->KeepAlive(lease_, quarter_);
  if (renewed.ok() || renewed.status().code() != StatusCode::kNotFound) return renewed.status();
  // The lease ended (etcd was away longer than the ttl) and took the key with it.
  lease_ = 0;
  registered_.store(false);
  return Register();
}

Status StoreRegistration::Register() {
  if (lease_ == 0) {
    auto granted = etcd_->GrantLease(ttl_, quarter_);
    if (!granted.ok()) return granted.status();
    lease_ = granted->id;
  }
  KVPOOL_RETURN_IF_ERROR(etcd_->Put(key_, value_, lease_, quarter_));
  registered_.store(true);
  return Status::Ok();
}

}  // namespace kvpool::etcd
