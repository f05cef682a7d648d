#include "cli/shutdown_signal.h"

#include <signal.h>

#include <cerrno>

namespace kvpool::cli {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
#ifdef KVPOOL_FAULT_HOOKS
  sigaddset(&set, SIGUSR2);
#endif
  return set;
}

int WaitForAny() {
  sigset_t set = ShutdownSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer closing a socket is an error value, not a process death
}

int WaitForShutdownSignal() {
  for (;;) {
    const int sig = WaitForAny();
    if (sig != SIGUSR2) return sig;  // only fault-hook builds wait for it; roles without a hook ignore it
  }
}

int WaitForShutdownSignalFor(long ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec wait{ms / 1000, (ms % 1000) * 1'000'000};
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &wait);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return 0;  // EINTR: another signal; wait on (for the whole time again)
  }
}

#ifdef KVPOOL_FAULT_HOOKS
int WaitForShutdownOrFaultSignal() { return WaitForAny(); }
#endif

}  // namespace kvpool::cli
