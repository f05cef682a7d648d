// kvpool report: one HTML page (report.html: the run table and every plot, needing nothing
// else to open) and PNG plots from `kvpool replay --json` results — throughput per GPU by
// concurrency, stacked prompt-token sources, TTFT p50/p90 — one line per mode.
//   kvpool report RESULTS.json... --out DIR [--published]
// The plotting is scripts/replay_report.py (matplotlib), run with /usr/bin/python3; this
// command finds it (ReportScript: installed beside the binary, or the source tree kvpool was
// built from; --script and KVPOOL_REPORT_SCRIPT override) and passes the arguments through.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"

#ifndef KVPOOL_SOURCE_DIR
#define KVPOOL_SOURCE_DIR "."
#endif

namespace kvpool::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> results;
  std::string out = "replay-report";
  std::string script;
  std::string python = "/usr/bin/python3";
  bool published = false;
};

// The plotting script: --script, else $KVPOOL_REPORT_SCRIPT, else the copy `cmake --install`
// put beside the binary (<prefix>/share/kvpool), else the source tree kvpool was built from.
std::string ReportScript(const ReportFlags& f) {
  if (!f.script.empty()) return f.script;
  if (const char* env = std::getenv("KVPOOL_REPORT_SCRIPT")) return env;
  std::error_code ignored;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  const std::filesystem::path installed = self.parent_path().parent_path() / "share" / "kvpool" / "replay_report.py";
  if (!self.empty() && std::filesystem::exists(installed, ignored)) return installed.string();
  return std::string(KVPOOL_SOURCE_DIR) + "/scripts/replay_report.py";
}

int RunReport(const ReportFlags& f) {
  const std::string script = ReportScript(f);
  if (!std::filesystem::exists(script)) {
    fmt::print(stderr, "kvpool report: plotting script {} not found (set --script)\n", script);
    return 1;
  }
  std::vector<std::string> args = {f.python, script, "--out", f.out};
  if (f.published) args.emplace_back("--published");
  args.insert(args.end(), f.results.begin(), f.results.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    fmt::print(stderr, "kvpool report: cannot start {}\n", f.python);
    return 1;
  }
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "kvpool report: {} {} failed (exit {})\n", f.python, script,
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  return 0;
}

}  // namespace

void AddReportCommand(CLI::App& app) {
  static ReportFlags f;
  auto* cmd = app.add_subcommand("report", "An HTML page and PNG plots from `kvpool replay --json` results");
  cmd->add_option("results", f.results, "JSON files written by kvpool replay --json")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", f.out, "folder for report.html and the PNG files")->capture_default_str();
  cmd->add_flag("--published", f.published, "draw the published single-server figures beside ours");
  cmd->add_option("--script", f.script, "the plotting script (default: the installed share/kvpool/replay_report.py, else the source tree's scripts/)");
  cmd->add_option("--python", f.python, "Python with matplotlib")->capture_default_str();
  cmd->callback([] { ExitCode() = RunReport(f); });
}

}  // namespace kvpool::cli
