// kvpool trace: work with agent-trace files (see src/trace/README.md).
//   kvpool trace synth --out FILE [--traces N] [--seed S] [--turn-scale X]
//       writes a deterministic synthetic AgentX corpus shaped like the public one
//   kvpool trace stats PATH [--format agentx|mooncake|auto] [--json] [--max-context TOKENS]
//                    [--strict] [--quantiles N]
//       validates a trace file or folder and prints its statistics and reuse ceiling
// Invalid traces are skipped with one line each on stderr (naming file, line, trace, request
// and field); an unusable input (missing, empty, nothing loadable, --strict) exits 2.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/trace_input.h"
#include "trace/agentx_writer.h"
#include "trace/corpus_synthesizer.h"
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
  std::string path;
  std::string format = "auto";
  bool json = false;
  bool strict = false;
  int64_t max_context_tokens = trace::kReferenceMaxContextTokens;
  int quantiles = 0;
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
  trace::LoadOptions load;
  load.strict = o.strict;
  Result<trace::Corpus> corpus = LoadTraceInput("trace stats", o.path, o.format, load);
  if (!corpus.ok()) {
    Fail("stats", corpus.status());
    return kUnusableTraceInputExit;
  }
  trace::StatsOptions options;
  options.max_context_tokens = o.max_context_tokens;
  options.quantiles = o.quantiles;
  const trace::TraceStats stats = trace::ComputeStats(*corpus, options);
  if (o.json) {
    fmt::print("{}\n", trace::StatsToJson(stats).dump(2));
  } else {
    fmt::print("{}: ", o.path);
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

  auto* st = cmd->add_subcommand("stats", "Validate traces and print their statistics and reuse ceiling");
  st->add_option("path", stats.path,
                 "an AgentX or Mooncake trace file (.jsonl, .json, either .gz) or a folder of AgentX trace files")
      ->required();
  st->add_option("--format", stats.format, "file format")
      ->check(CLI::IsMember({"agentx", "mooncake", "auto"}))
      ->capture_default_str();
  st->add_flag("--json", stats.json, "print one JSON object");
  st->add_option("--max-context", stats.max_context_tokens,
                 "count the traces whose peak input+output exceeds this many tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  st->add_flag("--strict", stats.strict, "fail on the first invalid trace instead of skipping it");
  st->add_option("--quantiles", stats.quantiles,
                 "with --json: add N+1 quantiles (0, 1/N, ..., 1) of every distribution, for plots")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  st->callback([] { ExitCode() = RunStats(stats); });
}

}  // namespace kvpool::cli
