// A child process for multi-process tests: spawned from argv, stdout+stderr captured in a log
// file (or stderr in a file of its own, for tests of what a command prints on stdout), killed (SIGTERM or SIGKILL) and reaped on demand or when it goes out of scope.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace kvpool::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string log_path, std::string stderr_path = "")
      : log_path_(std::move(log_path)), stderr_path_(std::move(stderr_path)) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (stderr_path_.empty()) {
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
    } else {
      posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    if (posix_spawn(&pid_, args[0], &actions, &attr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  ~ChildProcess() { Kill(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Sends `sig` and waits (up to `timeout`) for the process to end; returns its exit status
  // as from waitpid, or -1 if it was already reaped or did not end in time.
  int Kill(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    return Wait(timeout);
  }

  int Wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  // What it wrote: stdout and stderr, or stdout alone when stderr has a file of its own.
  std::string Log() const { return ReadWhole(log_path_); }
  // What it wrote on stderr, when it has a file of its own.
  std::string ErrorLog() const { return ReadWhole(stderr_path_); }

 private:
  static std::string ReadWhole(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string log_path_;
  std::string stderr_path_;
  pid_t pid_ = -1;
};

}  // namespace kvpool::testing
