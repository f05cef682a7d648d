// Subcommands of the `kvpool` binary. Each Add*Command registers one subcommand (its flags and
// its action) on the app; main.cc wires them together. Actions return a process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace kvpool::cli {

void AddMasterCommand(CLI::App& app);   // kvpool master
void AddStoreCommand(CLI::App& app);    // kvpool store
void AddServeCommand(CLI::App& app);    // kvpool serve (master + one store in one process)
void AddObjectCommands(CLI::App& app);  // kvpool put / get / exists / rm / stat
void AddBenchCommand(CLI::App& app);    // kvpool bench
void AddTraceCommand(CLI::App& app);    // kvpool trace synth / stats
void AddReplayCommand(CLI::App& app);   // kvpool replay (agent-trace replay on an emulated P/D deployment)
void AddReportCommand(CLI::App& app);   // kvpool report (plots from replay results)
void AddPlanCommand(CLI::App& app);     // kvpool plan (predicted reuse by pool size)
void AddCredentialCommand(CLI::App& app);  // kvpool credential issue (a tenant's credential)
void AddTopCommand(CLI::App& app);      // kvpool top (a live view of the pool)

// Set by the chosen subcommand's callback; main returns it.
int& ExitCode();

}  // namespace kvpool::cli
