// A real kvpool deployment for integration tests: one `kvpool master` process and N
// `kvpool store` processes on loopback, each its own process started from the built binary.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "client/client.h"

namespace kvpool::testing {

// A port that was free a moment ago (bind to 0, read it back, close).
inline int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct ClusterOptions {
  int stores = 2;
  std::string store_memory = "64MiB";
  int heartbeat_ttl_ms = 1500;
  int lease_ms = 2000;
  std::string auth_file;  // given to the master, the stores and ConnectWhenReady's client
  std::string store_ssd_size;  // each store an SSD tier of this size (kvpool store --ssd); "": none
  std::string store_ssd_max_object = "256KiB";
  std::vector<std::string> master_flags;  // more flags for `kvpool master`
  std::string master_metrics_listen;      // the master's /metrics address; "": none
  std::vector<std::string> store_flags;   // more flags for each `kvpool store`
};

class PoolCluster {
 public:
  explicit PoolCluster(ClusterOptions options) : options_(options) {
    dir_ = std::filesystem::temp_directory_path() / ("kvpool-test-" + std::to_string(getpid()) + "-" +
                                                     std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    master_address_ = "127.0.0.1:" + std::to_string(PickFreePort());
    StartMaster();
    for (int i = 0; i < options.stores; ++i) AddStore();
  }

  // Starts `kvpool master` on the cluster's address (again, after a kill: a restart).
  void StartMaster() {
    std::vector<std::string> args = {KVPOOL_BINARY, "master", "--listen", master_address_, "--metrics-listen", options_.master_metrics_listen,
                                     "--heartbeat-ttl-ms", std::to_string(options_.heartbeat_ttl_ms), "--lease-ms",
                                     std::to_string(options_.lease_ms)};
    args.insert(args.end(), options_.master_flags.begin(), options_.master_flags.end());
    master_ = std::make_unique<ChildProcess>(WithAuthFile(std::move(args)),
                                             (dir_ / ("master" + std::to_string(master_starts_++) + ".log")).string());
  }
  ~PoolCluster() {
    stores_.clear();
    master_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void AddStore() {
    stores_.push_back(StartStore(static_cast<int>(stores_.size())));
  }
  // Kills store `i` (SIGKILL, if it still runs) and starts it again with the same flags (with
  // an SSD tier: on the same file).
  void RestartStore(int i) {
    stores_[i].reset();
    stores_[i] = StartStore(i);
  }

  // Connects a client once `segments` segments are mounted (or fails after ~20 s).
  std::unique_ptr<client::Client> ConnectWhenReady(size_t segments, bool allow_shm = true) {
    client::ClientOptions o;
    o.pool = client::PoolParts::Single(master_address_);
    o.rpc_timeout = std::chrono::milliseconds(2000);
    o.transfer_timeout = std::chrono::milliseconds(5000);
    o.transfer.allow_shm = allow_shm;
    if (!options_.auth_file.empty()) {
      auto secret = SharedSecret::Load(options_.auth_file);
      if (!secret.ok()) return nullptr;
      o.credentials.secret = *std::move(secret);
    }
    for (int attempt = 0; attempt < 200; ++attempt) {
      auto c = client::Client::Connect(o);
      if (c.ok()) {
        auto s = (*c)->Stat();
        if (s.ok() && s->segments.size() == segments) return std::move(c.value());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return nullptr;
  }

  const std::string& master_address() const { return master_address_; }
  ChildProcess& master() { return *master_; }
  ChildProcess& store(int i) { return *stores_[i]; }
  std::string Logs() const {
    std::string all = "--- master\n" + master_->Log();
    for (size_t i = 0; i < stores_.size(); ++i) all += "--- store " + std::to_string(i) + "\n" + stores_[i]->Log();
    return all;
  }

 private:
  std::unique_ptr<ChildProcess> StartStore(int index) {
    const std::string name = "store" + std::to_string(index);
    std::vector<std::string> args = {KVPOOL_BINARY, "store", "--master", master_address_, "--memory",
                                     options_.store_memory, "--listen", "127.0.0.1:0", "--shm-dir", dir_.string(),
                                     "--no-huge-pages", "--heartbeat-interval-ms", "200"};
    if (!options_.store_ssd_size.empty()) {
      args.insert(args.end(), {"--ssd", (dir_ / (name + ".ssd")).string(), "--ssd-size", options_.store_ssd_size,
                               "--ssd-max-object", options_.store_ssd_max_object});
    }
    args.insert(args.end(), options_.store_flags.begin(), options_.store_flags.end());
    return std::make_unique<ChildProcess>(
        WithAuthFile(std::move(args)), (dir_ / (name + "-" + std::to_string(store_starts_++) + ".log")).string());
  }

  std::vector<std::string> WithAuthFile(std::vector<std::string> args) const {
    if (!options_.auth_file.empty()) args.insert(args.end(), {"--auth-file", options_.auth_file});
    return args;
  }

  static inline int counter_ = 0;
  ClusterOptions options_;
  std::filesystem::path dir_;
  std::string master_address_;
  std::unique_ptr<ChildProcess> master_;
  int master_starts_ = 0;
  int store_starts_ = 0;
  std::vector<std::unique_ptr<ChildProcess>> stores_;
};

}  // namespace kvpool::testing
