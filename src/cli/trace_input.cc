#include "cli/trace_input.h"

#include <fmt/format.h>

#include <cstdio>

#include "trace/corpus_synthesizer.h"
#include "trace/trace_loader.h"

namespace kvpool::cli {

Result<trace::Corpus> LoadTraceInput(std::string_view command, const std::string& path, const std::string& format,
                                     const trace::LoadOptions& options) {
  Result<std::optional<trace::TraceFormat>> chosen = trace::ParseTraceFormatChoice(format);
  if (!chosen.ok()) return chosen.status();
  Result<trace::Corpus> corpus = trace::LoadTraces(path, *chosen, options);
  if (!corpus.ok()) return corpus.status();
  for (const std::string& message : corpus->skipped_invalid)
    fmt::print(stderr, "kvpool {}: skipped {}\n", command, message);
  if (!corpus->skipped_invalid.empty())
    fmt::print(stderr, "kvpool {}: skipped {} invalid trace(s); {} loaded (--strict makes the first one fatal)\n",
               command, corpus->skipped_invalid.size(), corpus->traces.size());
  return corpus;
}

void AddCorpusSourceFlags(CLI::App* cmd, CorpusSource& source, bool trace_positional) {
  auto* group = cmd->add_option_group("trace source");
  group->add_option(trace_positional ? "trace,--trace" : "--trace", source.trace_file,
                    "an AgentX or Mooncake trace file (.jsonl, .json, either .gz) or a folder of AgentX trace files");
  group->add_option("--synth", source.synth_traces, "a synthetic AgentX corpus of N traces instead")
      ->check(CLI::Range(1, 100'000));
  group->require_option(1);
  cmd->add_option("--format", source.format, "trace file format")
      ->check(CLI::IsMember({"agentx", "mooncake", "auto"}))
      ->capture_default_str();
  cmd->add_flag("--strict", source.strict, "fail on the first invalid trace instead of skipping it");
  cmd->add_option("--synth-turn-scale", source.synth_turn_scale, "scale the synthetic traces' turns (e.g. 0.3)")
      ->check(CLI::Range(0.001, 10.0))
      ->capture_default_str();
}

Result<LoadedCorpus> LoadCorpusSource(std::string_view command, const CorpusSource& source, uint64_t seed,
                                      int64_t max_context_tokens) {
  LoadedCorpus out;
  if (source.trace_file.empty()) {
    trace::SynthesisOptions s;
    s.traces = source.synth_traces;
    s.turn_scale = source.synth_turn_scale;
    out.corpus = trace::SynthesizeCorpus(s, seed);
    out.description = fmt::format("synthetic corpus ({} traces, seed {}, turn scale {})", source.synth_traces, seed,
                                  source.synth_turn_scale);
    return out;
  }
  trace::LoadOptions load;
  load.max_context_tokens = max_context_tokens;
  load.strict = source.strict;
  auto loaded = LoadTraceInput(command, source.trace_file, source.format, load);
  if (!loaded.ok()) return loaded.status();
  if (loaded->traces.empty()) {
    return InvalidArgument(fmt::format("{}: all {} traces exceed the geometry's {}-token context", source.trace_file,
                                       loaded->skipped_over_max_context, max_context_tokens));
  }
  out.corpus = std::move(loaded).value();
  out.description = source.trace_file;
  return out;
}

}  // namespace kvpool::cli
