#include "cli/shutdown_signal.h"

#include <signal.h>

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

#ifdef KVPOOL_FAULT_HOOKS
int WaitForShutdownOrFaultSignal() { return WaitForAny(); }
#endif

}  // namespace kvpool::cli
