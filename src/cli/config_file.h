// Configuration files for the long-running roles (issue 19). `kvpool ROLE --config FILE` reads
// the role's flags from a TOML file whose keys are the flag names without "--" (`memory =
// "64GiB"`, `no-huge-pages = true`, lists as `namespace-quota = ["a=1GiB", "b=2GiB"]`; no
// [sections]: the file is the role's). Flags on the command line override the file. A key that
// is no flag of the role is an error naming the file, line and key, and nothing starts.
// `--print-config` (or `kvpool config print ROLE ...`) prints the effective configuration, as
// such a file, and exits.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kvpool::cli {

// Gives the role --config FILE and --print-config.
void AddConfigFile(CLI::App* role);
// First thing in the role's callback: true when it was asked to print its configuration
// (printed; the role then does nothing else).
bool PrintedConfig(const CLI::App* role);
// main, before parsing `args` (args[0] is the program): `kvpool config print ROLE ...` becomes
// `kvpool ROLE ... --print-config`, and a role's --config FILE is handed to `app` itself, with
// every key of the file filed under the role (CLI11 2.1 reads configuration files only for the
// app, not for a subcommand). Returns the command line to parse.
std::vector<std::string> PrepareConfig(CLI::App& app, std::vector<std::string> args);
// The message for a configuration file's bad key: "FILE:LINE: KEY is not a flag of kvpool ROLE
// (kvpool ROLE --help lists them)", or CLI11's own where the file or line cannot be found.
std::string ExplainConfigError(const CLI::ConfigError& error);

}  // namespace kvpool::cli
