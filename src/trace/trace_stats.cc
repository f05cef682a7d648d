#include "trace/trace_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvpool::trace {
namespace {

void AddWalked(const Request& r, int64_t hits, int64_t block_size, std::vector<double>& new_tokens) {
  new_tokens.push_back(double(std::max<int64_t>(0, r.input_tokens - hits * block_size)));
}

nlohmann::json ToJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"max", d.max}};
}

std::string Tokens(double n) {
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}
std::string Seconds(double s) {
  if (s >= 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 60) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} s", s);
}
template <typename Format>
std::string Line(std::string_view name, const Distribution& d, Format format) {
  return fmt::format("  {:<22} p50 {:>9}  p90 {:>9}  max {:>9}  mean {:>9}  (n={})\n", name, format(d.p50),
                     format(d.p90), format(d.max), format(d.mean), d.count);
}

}  // namespace

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / double(values.size());
  const auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * double(values.size())));
    return values[std::clamp<size_t>(k, 1, values.size()) - 1];
  };
  d.p50 = rank(0.5);
  d.p90 = rank(0.9);
  d.max = values.back();
  return d;
}

TraceStats ComputeStats(const Corpus& corpus) {
  TraceStats s;
  s.format = corpus.format;
  s.traces = static_cast<int64_t>(corpus.traces.size());
  s.dropped_subagents = corpus.dropped_subagents;
  s.skipped_over_max_context = corpus.skipped_over_max_context;
  std::vector<double> input, fresh, output, think, turns, duration, first_input, last_input, peak;

  // Mooncake ids are global: one walk over the file. AgentX: one walk per trace.
  PrefixHitWalk global_walk;
  for (const Trace& t : corpus.traces) {
    s.top_level_requests += static_cast<int64_t>(t.requests.size());
    s.subagent_requests += static_cast<int64_t>(t.SubagentRequestCount());
    s.subagents += static_cast<int64_t>(t.subagents.size());
    for (size_t i = 0; i < t.subagents.size();) {
      size_t j = i;
      while (j < t.subagents.size() && t.subagents[j].spawned_after_turn == t.subagents[i].spawned_after_turn) ++j;
      s.max_fan_out = std::max<int64_t>(s.max_fan_out, static_cast<int64_t>(j - i));
      i = j;
    }
    for (const Subagent& sub : t.subagents) s.background_subagents += sub.background() ? 1 : 0;

    PrefixHitWalk trace_walk;
    PrefixHitWalk& walk = corpus.format == TraceFormat::kMooncake ? global_walk : trace_walk;
    double first_start = INFINITY, last_end = 0;
    for (const Request* r : t.RequestsInTimeOrder()) {
      AddWalked(*r, walk.Visit(r->hash_ids), t.block_size, fresh);
      input.push_back(double(r->input_tokens));
      output.push_back(double(r->output_tokens));
      think.push_back(r->think_time_s);
      first_start = std::min(first_start, r->start_time_s);
      last_end = std::max(last_end, r->end_time_s());
    }
    if (corpus.format == TraceFormat::kAgentX) s.ceiling += trace_walk.totals();
    if (!t.requests.empty()) {
      turns.push_back(double(t.requests.size()));
      duration.push_back(last_end - first_start);
      first_input.push_back(double(t.requests.front().input_tokens));
      last_input.push_back(double(t.requests.back().input_tokens));
    }
    const int64_t peak_context = t.PeakContextTokens();
    peak.push_back(double(peak_context));
    if (peak_context > kReferenceMaxContextTokens) ++s.traces_over_reference_context;
  }
  if (corpus.format == TraceFormat::kMooncake) s.ceiling = global_walk.totals();
  s.requests = s.top_level_requests + s.subagent_requests;
  s.input_tokens = Summarize(std::move(input));
  s.new_tokens = Summarize(std::move(fresh));
  s.output_tokens = Summarize(std::move(output));
  s.think_time_s = Summarize(std::move(think));
  s.main_turns = Summarize(std::move(turns));
  s.session_duration_s = Summarize(std::move(duration));
  s.first_input_tokens = Summarize(std::move(first_input));
  s.last_input_tokens = Summarize(std::move(last_input));
  s.peak_context_tokens = Summarize(std::move(peak));
  return s;
}

std::string FormatStatsText(const TraceStats& s) {
  const auto count = [](double n) { return fmt::format("{:.0f}", n); };
  std::string out;
  out += fmt::format("format {}: {} traces, {} requests ({} top-level, {} in {} subagents)\n", TraceFormatName(s.format),
                     s.traces, s.requests, s.top_level_requests, s.subagent_requests, s.subagents);
  out += fmt::format("  subagents: max fan-out {}, {} background; loader dropped {} subagents, skipped {} over max context\n",
                     s.max_fan_out, s.background_subagents, s.dropped_subagents, s.skipped_over_max_context);
  out += fmt::format("  reuse ceiling {:.2f}% ({} of {} blocks hit)\n", 100 * s.ceiling.ratio(), s.ceiling.hit_blocks,
                     s.ceiling.total_blocks);
  out += "per request:\n";
  out += Line("input tokens", s.input_tokens, Tokens);
  out += Line("new tokens", s.new_tokens, Tokens);
  out += Line("output tokens", s.output_tokens, Tokens);
  out += Line("think time", s.think_time_s, Seconds);
  out += "per trace:\n";
  out += Line("main-thread turns", s.main_turns, count);
  out += Line("session duration", s.session_duration_s, Seconds);
  out += Line("first main input", s.first_input_tokens, Tokens);
  out += Line("last main input", s.last_input_tokens, Tokens);
  out += Line("peak in+out", s.peak_context_tokens, Tokens);
  out += fmt::format("  {} traces exceed a {}-token context\n", s.traces_over_reference_context, kReferenceMaxContextTokens);
  return out;
}

nlohmann::json StatsToJson(const TraceStats& s) {
  return {
      {"format", TraceFormatName(s.format)},
      {"traces", s.traces},
      {"requests", s.requests},
      {"top_level_requests", s.top_level_requests},
      {"subagent_requests", s.subagent_requests},
      {"subagents", s.subagents},
      {"background_subagents", s.background_subagents},
      {"max_fan_out", s.max_fan_out},
      {"dropped_subagents", s.dropped_subagents},
      {"skipped_over_max_context", s.skipped_over_max_context},
      {"traces_over_reference_context", s.traces_over_reference_context},
      {"reference_context_tokens", kReferenceMaxContextTokens},
      {"reuse_ceiling", {{"hit_blocks", s.ceiling.hit_blocks}, {"total_blocks", s.ceiling.total_blocks},
                         {"ratio", s.ceiling.ratio()}}},
      {"input_tokens", ToJson(s.input_tokens)},
      {"new_tokens", ToJson(s.new_tokens)},
      {"output_tokens", ToJson(s.output_tokens)},
      {"think_time_s", ToJson(s.think_time_s)},
      {"main_turns", ToJson(s.main_turns)},
      {"session_duration_s", ToJson(s.session_duration_s)},
      {"first_input_tokens", ToJson(s.first_input_tokens)},
      {"last_input_tokens", ToJson(s.last_input_tokens)},
      {"peak_context_tokens", ToJson(s.peak_context_tokens)},
  };
}

}  // namespace kvpool::trace
