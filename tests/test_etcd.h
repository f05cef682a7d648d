// A real etcd server for tests: Debian's /usr/bin/etcd as a child process on free loopback
// ports, with its data in a temporary folder. Kill() and Start() again keep the data, as a
// crash and restart would.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "child_process.h"
#include "etcd/etcd_client.h"
#include "pool_cluster.h"

namespace kvpool::testing {

class TestEtcd {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";
  static bool Installed() { return std::filesystem::exists(kBinary); }

  explicit TestEtcd(std::filesystem::path dir)
      : dir_(std::move(dir)), client_port_(PickFreePort()), peer_port_(PickFreePort()) {}

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

  // Starts etcd and waits (up to 20 s) until it answers; false if it did not.
  bool Start() {
    const std::string client_url = "http://" + endpoint();
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer_port_);
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kBinary, "--name", "test", "--data-dir", (dir_ / "etcd-data").string(),
                                 "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                                 "--initial-cluster", "test=" + peer_url},
        (dir_ / ("etcd" + std::to_string(starts_++) + ".log")).string());
    auto client = etcd::EtcdClient::Create(endpoint());
    for (int attempt = 0; attempt < 200 && process_->started(); ++attempt) {
      auto leader = (*client)->GetLeader("kvpool-test/ready", std::chrono::milliseconds(100));
      if (leader.ok() || leader.status().code() == StatusCode::kNotFound) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  void Kill() { process_.reset(); }
  std::string Log() const { return process_ ? process_->Log() : ""; }

 private:
  std::filesystem::path dir_;
  int client_port_, peer_port_;
  int starts_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace kvpool::testing
