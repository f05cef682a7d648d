// Orderly shutdown on SIGINT/SIGTERM for the long-running roles (master, store, serve).
#pragma once

namespace kvpool::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and threads it starts later).
// REQUIRES: called in main before any thread is created.
void BlockShutdownSignals();

// Waits until SIGINT or SIGTERM arrives; returns its number.
int WaitForShutdownSignal();
// The same, for at most `ms` milliseconds: 0 when none came in that time (kvpool top's pause
// between refreshes, which Ctrl-C ends at once).
int WaitForShutdownSignalFor(long ms);

#ifdef KVPOOL_FAULT_HOOKS
// Fault-hook builds (-DKVPOOL_FAULT_HOOKS=ON): SIGUSR2 is blocked too, and this waits for it
// as well, returning SIGUSR2 when it came.
int WaitForShutdownOrFaultSignal();
#endif

}  // namespace kvpool::cli
