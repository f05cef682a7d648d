// kvpool trace: work with agent-trace files (see src/trace/README.md).
//   kvpool trace synth --out FILE [--traces N] [--seed S] [--turn-scale X]
//       writes a deterministic synthetic AgentX corpus shaped like the public one
//   kvpool trace stats FILE [--format agentx|mooncake|auto] [--json] [--max-context TOKENS]
//       validates a trace file and prints its statistics and reuse ceiling
// Bad input (a malformed line, a missing file) prints the reason, naming file, line and
// field, and exits 1.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "trace/agentx_writer.h"
#include "trace/corpus_synthesizer.h"
#include "trace/trace_loader.h"
#include "trace/trace_stats.h"

namespace kvpool::cli {
namespace {

struct SynthOptions {
  std::string out;
  int traces = 393;
  uint64_t seed = 1;
  double turn_scale = 1.0;
};

struct StatsOptions {
  std::string file;
  std::string format = "auto";
  bool json = false;
  int64_t max_context_tokens = 0;
};

int Fail(std::string_view command, const Status& status) {
  fmt::print(stderr, "kvpool trace {}: {}\n", command, status.message());
  return 1;
}

int RunSynth(const SynthOptions& o) {
  trace::SynthesisOptions options;
  options.traces = o.traces;
  options.turn_scale = o.turn_scale;
  const trace::Corpus corpus = trace::SynthesizeCorpus(options, o.seed);
  if (Status s = trace::WriteAgentXFile(corpus, o.out); !s.ok()) return Fail("synth", s);
  const trace::TraceStats stats = trace::ComputeStats(corpus);
  fmt::print("wrote {} traces ({} requests, reuse ceiling {:.2f}%) to {}\n", stats.traces, stats.requests,
             100 * stats.ceiling.ratio(), o.out);
  return 0;
}

int RunStats(const StatsOptions& o) {
  Result<std::optional<trace::TraceFormat>> format = trace::ParseTraceFormatChoice(o.format);
  if (!format.ok()) return Fail("stats", format.status());
  trace::LoadOptions load;
  load.max_context_tokens = o.max_context_tokens;
  Result<trace::Corpus> corpus = trace::LoadTraceFile(o.file, *format, load);
  if (!corpus.ok()) return Fail("stats", corpus.status());
  const trace::TraceStats stats = trace::ComputeStats(*corpus);
  if (o.json) {
    fmt::print("{}\n", trace::StatsToJson(stats).dump(2));
  } else {
    fmt::print("{}: ", o.file);
    fmt::print("{}", trace::FormatStatsText(stats));
  }
  return 0;
}

}  // namespace

void AddTraceCommand(CLI::App& app) {
  static SynthOptions synth;
  static StatsOptions stats;
  auto* cmd = app.add_subcommand("trace", "Agent-trace files: synthesize a corpus, validate and summarize one");
  cmd->require_subcommand(1);

  auto* s = cmd->add_subcommand("synth", "Write a deterministic synthetic AgentX corpus shaped like the public one");
  s->add_option("--out", synth.out, "output JSONL file")->required();
  s->add_option("--traces", synth.traces, "number of traces")->check(CLI::Range(1, 1'000'000))->capture_default_str();
  s->add_option("--seed", synth.seed, "seed; the same seed writes the same bytes")->capture_default_str();
  s->add_option("--turn-scale", synth.turn_scale, "multiply every trace's turns (e.g. 0.1 for a small corpus)")
      ->check(CLI::Range(0.001, 10.0))
      ->capture_default_str();
  s->callback([] { ExitCode() = RunSynth(synth); });

  auto* st = cmd->add_subcommand("stats", "Validate a trace file and print its statistics and reuse ceiling");
  st->add_option("file", stats.file, "AgentX or Mooncake JSONL file")->required();
  st->add_option("--format", stats.format, "file format")
      ->check(CLI::IsMember({"agentx", "mooncake", "auto"}))
      ->capture_default_str();
  st->add_flag("--json", stats.json, "print one JSON object");
  st->add_option("--max-context", stats.max_context_tokens,
                 "skip traces (Mooncake: requests) whose peak input+output exceeds this many tokens; 0 = no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  st->callback([] { ExitCode() = RunStats(stats); });
}

}  // namespace kvpool::cli
