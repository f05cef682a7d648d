#include "trace/trace_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvpool::trace {
namespace {

nlohmann::json ToJson(const Distribution& d) {
  nlohmann::json j = {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"max", d.max}};
  if (!d.quantiles.empty()) j["quantiles"] = d.quantiles;
  return j;
}

// The waits between a thread's requests (see TraceStats::gap_s).
void AddGaps(const Trace& t, std::vector<double>& gaps) {
  const auto wait = [](double start, double previous_end) { return std::max(0.0, start - previous_end); };
  for (size_t i = 1; i < t.requests.size(); ++i)
    gaps.push_back(wait(t.requests[i].start_time_s, t.requests[i - 1].end_time_s()));
  for (const Subagent& sub : t.subagents) {
    double previous_end = t.requests[sub.spawned_after_turn].end_time_s();
    for (const Request& r : sub.requests) {
      gaps.push_back(wait(r.start_time_s, previous_end));
      previous_end = r.end_time_s();
    }
  }
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

Distribution Summarize(std::vector<double> values, int quantiles) {
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
  if (quantiles > 0) {
    d.quantiles.push_back(values.front());
    for (int i = 1; i <= quantiles; ++i) d.quantiles.push_back(rank(double(i) / quantiles));
  }
  return d;
}

TraceStats ComputeStats(const Corpus& corpus, const StatsOptions& options) {
  TraceStats s;
  s.format = corpus.format;
  s.traces = static_cast<int64_t>(corpus.traces.size());
  s.dropped_subagents = corpus.dropped_subagents;
  s.skipped_over_max_context = corpus.skipped_over_max_context;
  s.skipped_invalid = static_cast<int64_t>(corpus.skipped_invalid.size());
  s.max_context_tokens = options.max_context_tokens;
  std::vector<double> input, fresh, output, think, gaps, turns, duration, first_input, last_input, peak;

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
      const int64_t hit_tokens = std::min(r->input_tokens, walk.Visit(r->hash_ids) * t.block_size);
      s.ceiling_hit_tokens += hit_tokens;
      s.input_tokens_total += r->input_tokens;
      fresh.push_back(double(r->input_tokens - hit_tokens));
      input.push_back(double(r->input_tokens));
      output.push_back(double(r->output_tokens));
      if (r->think_time_s) think.push_back(*r->think_time_s);
      s.requests_missing_api_time += r->api_time_s ? 0 : 1;
      s.requests_missing_think_time += r->think_time_s ? 0 : 1;
      s.requests_missing_timing += r->api_time_s && r->think_time_s ? 0 : 1;
      s.requests_with_partial_tail += r->input_tokens > int64_t(r->hash_ids.size()) * t.block_size ? 1 : 0;
      first_start = std::min(first_start, r->start_time_s);
      last_end = std::max(last_end, r->end_time_s());
    }
    if (!t.requests.empty()) AddGaps(t, gaps);
    if (corpus.format == TraceFormat::kAgentX) s.ceiling += trace_walk.totals();
    if (!t.requests.empty()) {
      turns.push_back(double(t.requests.size()));
      duration.push_back(last_end - first_start);
      first_input.push_back(double(t.requests.front().input_tokens));
      last_input.push_back(double(t.requests.back().input_tokens));
    }
    const int64_t peak_context = t.PeakContextTokens();
    peak.push_back(double(peak_context));
    if (peak_context > options.max_context_tokens) ++s.traces_over_max_context;
  }
  if (corpus.format == TraceFormat::kMooncake) s.ceiling = global_walk.totals();
  s.requests = s.top_level_requests + s.subagent_requests;
  const int q = options.quantiles;
  s.input_tokens = Summarize(std::move(input), q);
  s.new_tokens = Summarize(std::move(fresh), q);
  s.output_tokens = Summarize(std::move(output), q);
  s.think_time_s = Summarize(std::move(think), q);
  s.gap_s = Summarize(std::move(gaps), q);
  s.main_turns = Summarize(std::move(turns), q);
  s.session_duration_s = Summarize(std::move(duration), q);
  s.first_input_tokens = Summarize(std::move(first_input), q);
  s.last_input_tokens = Summarize(std::move(last_input), q);
  s.peak_context_tokens = Summarize(std::move(peak), q);
  return s;
}

std::string FormatStatsText(const TraceStats& s) {
  const auto count = [](double n) { return fmt::format("{:.0f}", n); };
  std::string out;
  out += fmt::format("format {}: {} traces, {} requests ({} top-level, {} in {} subagents)\n", TraceFormatName(s.format),
                     s.traces, s.requests, s.top_level_requests, s.subagent_requests, s.subagents);
  out += fmt::format("  subagents: max fan-out {}, {} background; loader dropped {} subagents\n", s.max_fan_out,
                     s.background_subagents, s.dropped_subagents);
  out += fmt::format("  loader skipped {} invalid traces and {} over its max context\n", s.skipped_invalid,
                     s.skipped_over_max_context);
  out += fmt::format("  reuse ceiling {:.2f}% of blocks ({} of {} hit), {:.2f}% of input tokens\n",
                     100 * s.ceiling.ratio(), s.ceiling.hit_blocks, s.ceiling.total_blocks, 100 * s.token_ceiling());
  out += fmt::format("  requests missing timing: {} ({} without api_time: the replay waits the gap between start "
                     "times; {} without think_time)\n",
                     s.requests_missing_timing, s.requests_missing_api_time, s.requests_missing_think_time);
  out += fmt::format("  requests ending inside a block (a partial tail, never a hit): {}\n",
                     s.requests_with_partial_tail);
  out += "per request:\n";
  out += Line("input tokens", s.input_tokens, Tokens);
  out += Line("new tokens", s.new_tokens, Tokens);
  out += Line("output tokens", s.output_tokens, Tokens);
  out += Line("think time (recorded)", s.think_time_s, Seconds);
  out += Line("gap before request", s.gap_s, Seconds);
  out += "per trace:\n";
  out += Line("main-thread turns", s.main_turns, count);
  out += Line("session duration", s.session_duration_s, Seconds);
  out += Line("first main input", s.first_input_tokens, Tokens);
  out += Line("last main input", s.last_input_tokens, Tokens);
  out += Line("peak in+out", s.peak_context_tokens, Tokens);
  out += fmt::format("  {} traces exceed a {}-token context\n", s.traces_over_max_context, s.max_context_tokens);
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
      {"skipped_invalid", s.skipped_invalid},
      {"max_context_tokens", s.max_context_tokens},
      {"traces_over_max_context", s.traces_over_max_context},
      {"requests_missing_api_time", s.requests_missing_api_time},
      {"requests_missing_think_time", s.requests_missing_think_time},
      {"requests_missing_timing", s.requests_missing_timing},
      {"requests_with_partial_tail", s.requests_with_partial_tail},
      {"reuse_ceiling", {{"hit_blocks", s.ceiling.hit_blocks}, {"total_blocks", s.ceiling.total_blocks},
                         {"ratio", s.ceiling.ratio()}}},
      {"token_reuse_ceiling", {{"hit_tokens", s.ceiling_hit_tokens}, {"input_tokens", s.input_tokens_total},
                               {"ratio", s.token_ceiling()}}},
      {"input_tokens", ToJson(s.input_tokens)},
      {"new_tokens", ToJson(s.new_tokens)},
      {"output_tokens", ToJson(s.output_tokens)},
      {"think_time_s", ToJson(s.think_time_s)},
      {"gap_s", ToJson(s.gap_s)},
      {"main_turns", ToJson(s.main_turns)},
      {"session_duration_s", ToJson(s.session_duration_s)},
      {"first_input_tokens", ToJson(s.first_input_tokens)},
      {"last_input_tokens", ToJson(s.last_input_tokens)},
      {"peak_context_tokens", ToJson(s.peak_context_tokens)},
  };
}

}  // namespace kvpool::trace
