// kvpool: one binary for every role (master, store, all-in-one serve) and for users
// (put/get/stat/bench). `kvpool --help` and `kvpool SUBCOMMAND --help` document the flags;
// the roles also read them from a file (--config, cli/config_file.h).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/shutdown_signal.h"

int main(int argc, char** argv) {
  // Before any thread starts, so every thread inherits the blocked mask and only
  // WaitForShutdownSignal() sees SIGINT/SIGTERM.
  kvpool::cli::BlockShutdownSignals();
  // Logs go to stderr: stdout is the command's output (`kvpool get KEY -`'s bytes, `stat --json`),
  // which a log line (a transport falling back to tcp, say) must never corrupt.
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"kvpool: a shared KV-cache pool for LLM serving"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvpool 0.1.0");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  kvpool::cli::AddMasterCommand(app);
  kvpool::cli::AddStoreCommand(app);
  kvpool::cli::AddServeCommand(app);
  kvpool::cli::AddObjectCommands(app);
  kvpool::cli::AddBenchCommand(app);
  kvpool::cli::AddTraceCommand(app);
  kvpool::cli::AddReplayCommand(app);
  kvpool::cli::AddReportCommand(app);
  kvpool::cli::AddPlanCommand(app);
  kvpool::cli::AddCredentialCommand(app);
  kvpool::cli::AddTopCommand(app);
  std::vector<std::string> args = kvpool::cli::PrepareConfig(app, std::vector<std::string>(argv, argv + argc));
  std::vector<char*> pointers;
  for (std::string& arg : args) pointers.push_back(arg.data());
  try {
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::ConfigError& e) {  // a configuration file's bad key: say where
    std::fprintf(stderr, "kvpool: %s\n", kvpool::cli::ExplainConfigError(e).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return kvpool::cli::ExitCode();
}
