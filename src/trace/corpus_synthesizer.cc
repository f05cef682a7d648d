#include "trace/corpus_synthesizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <map>
#include <optional>
#include <string>

namespace kvpool::trace {
namespace {

// SplitMix64 plus hand-written distributions: <random>'s distributions differ between
// standard libraries, and a seed must mean the same corpus everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  int64_t UniformInt(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(double p) { return Uniform() < p; }
  double Normal() {  // Box-Muller; 1 - Uniform() is in (0, 1], so the log is finite
    const double r = std::sqrt(-2.0 * std::log(1.0 - Uniform()));
    return r * std::cos(2.0 * M_PI * Uniform());
  }
  double LogNormal(double median, double sigma) { return median * std::exp(sigma * Normal()); }
  template <size_t N>
  size_t Pick(const std::array<double, N>& weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    for (size_t i = 0; i < N; ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return N - 1;
  }

 private:
  uint64_t state_;
};

// The shape of the published corpus. Medians and spreads were tuned until ComputeStats on
// the default corpus landed on the published figures (see README.md).
constexpr double kMedianTurns = 65, kTurnsSigma = 1.25;
constexpr double kFirstUserTokensMedian = 19'000, kFirstUserTokensSigma = 0.6;
constexpr double kGrowthTokensMedian = 1'700, kGrowthTokensSigma = 1.05;  // new tokens per turn
constexpr double kOutputTokensMedian = 250, kOutputTokensSigma = 1.1;
constexpr int64_t kMaxOutputTokens = 32'000;
constexpr double kToolWaitMedianS = 25, kToolWaitSigma = 1.3;  // think time after tool_use
constexpr double kUserWaitMedianS = 120, kUserWaitSigma = 1.2;  // think time after end_turn
constexpr double kEndTurnChance = 0.10;
constexpr double kLongPauseChance = 0.01;  // per turn: 5-60 min away
constexpr double kDivergeAfterLongPauseChance = 0.35;
// Per turn: the client rewrites part of the history (e.g. clears old tool results), so the
// prompt matches the previous one only up to a random point.
constexpr double kHistoryEditChance = 0.04;
constexpr double kMaxWaitS = 30 * 60;  // ordinary waits; longer ones are long pauses
constexpr double kPlantedPauseS = 87 * 60;  // the published corpus's longest pause
constexpr double kLargeWindowChance = 0.85;  // 1M-token window; else 200K
constexpr double kFanOutChance = 0.009;     // per gap between parent turns
constexpr std::array<double, 4> kFanOutWeights = {0.45, 0.25, 0.15, 0.15};  // 1..4 subagents
constexpr double kBackgroundFanOutChance = 0.15;  // async_launched after the last turn
constexpr double kSubagentTurnsMedian = 30, kSubagentTurnsSigma = 1.0;
constexpr double kSubagentGrowthTokensMedian = 1'500, kSubagentGrowthTokensSigma = 1.0;
constexpr int kMaxSubagentTurns = 400;
constexpr double kStreamingChance = 0.95;
constexpr double kDecodeTokensPerS = 60, kPrefillTokensPerS = 10'000;

double Millis(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

struct SubagentKind {
  const char* name;
  double weight;
  int64_t system_tokens;
  int64_t tool_tokens;
  bool uses_small_model;
};
constexpr std::array<SubagentKind, 3> kSubagentKinds = {{
    {"Explore", 0.45, 2'600, 12'000, true},
    {"general-purpose", 0.40, 3'000, 20'000, false},
    {"Plan", 0.15, 2'800, 12'000, false},
}};

// Builds one trace. Block ids are local to the trace: a counter from 0.
class TraceSynthesizer {
 public:
  TraceSynthesizer(const SynthesisOptions& options, uint64_t seed, int index)
      : options_(options),
        index_(index),
        rng_(seed ^ (0x51ed27a1c9f3b5e7ULL * (uint64_t(index) + 1))),
        tail_rng_(~seed ^ (0x2545f4914f6cdd1dULL * (uint64_t(index) + 1))) {}

  Trace Build(uint64_t seed) {
    Trace trace;
    trace.id = fmt::format("synth-{}-{:04d}", seed, index_);
    trace.block_size = options_.block_size;
    trace.hash_id_scope = "local";
    trace.system_tokens = rng_.UniformInt(2'500, 4'500);
    trace.tool_tokens = rng_.UniformInt(12'000, 24'000);
    const bool large_window = rng_.Chance(kLargeWindowChance);
    main_model_ = large_window ? "claude-opus-4-6" : "claude-sonnet-4-5";
    AddModel(trace, main_model_);
    const double window = large_window ? 1'000'000 : 200'000;
    const double compact_at = window * (large_window ? rng_.Uniform(0.82, 0.93) : rng_.Uniform(0.75, 0.88));
    const int max_turns = std::max(2, static_cast<int>(std::lround(options_.max_turns * options_.turn_scale)));
    const int turns = std::clamp(
        static_cast<int>(std::lround(rng_.LogNormal(kMedianTurns, kTurnsSigma) * options_.turn_scale)), 2, max_turns);

    // Every main-thread prompt starts with the system prompt and tool definitions.
    BlockIdsBuilder ids;
    AppendFresh(ids, BlocksFor(trace.system_tokens + trace.tool_tokens));
    const std::vector<uint64_t> stable_prefix(ids.current().begin(), ids.current().end());
    int64_t new_tokens = BlocksFor(rng_.LogNormal(kFirstUserTokensMedian, kFirstUserTokensSigma)) * options_.block_size;
    AppendFresh(ids, new_tokens / options_.block_size);

    double free_at = 0;  // when the main thread may send again (previous turn and gating subagents done)
    double think = 0;
    for (int turn = 0; turn < turns; ++turn) {
      const bool last = turn + 1 == turns;
      Request r;
      r.start_time_s = Millis(free_at + think);
      r.think_time_s = Millis(think);
      r.model = main_model_;
      r.hash_ids = ids.Snapshot();
      r.input_tokens = InputTokens(r.hash_ids);
      const bool compacting = !last && r.input_tokens > compact_at;
      r.output_tokens = compacting ? rng_.UniformInt(3'000, 6'000) : OutputTokens(kOutputTokensMedian, kOutputTokensSigma);
      r.stop_reason = (last || compacting || rng_.Chance(kEndTurnChance)) ? "end_turn" : "tool_use";
      SetTiming(r, new_tokens);
      trace.requests.push_back(r);
      free_at = r.end_time_s();

      if (!last && rng_.Chance(kFanOutChance)) {
        const size_t fan_out = rng_.Pick(kFanOutWeights) + 1;
        for (size_t i = 0; i < fan_out; ++i) {
          Subagent s = BuildSubagent(trace, r.end_time_s() + 0.05 * double(i), SubagentStatus::kCompleted, window);
          s.spawned_after_turn = static_cast<size_t>(turn);
          s.gates_turn = static_cast<size_t>(turn + 1);
          free_at = std::max(free_at, s.spawn_time_s + s.duration_ms / 1000.0);
          trace.subagents.push_back(std::move(s));
        }
      }
      if (last && rng_.Chance(kBackgroundFanOutChance)) {
        const int64_t count = rng_.UniformInt(1, 2);
        for (int64_t i = 0; i < count; ++i) {
          Subagent s = BuildSubagent(trace, r.end_time_s() + 0.05 * double(i), SubagentStatus::kAsyncLaunched, window);
          s.spawned_after_turn = static_cast<size_t>(turn);
          trace.subagents.push_back(std::move(s));
        }
      }
      if (last) break;

      // The next prompt.
      if (compacting) {  // the summary replaces the conversation; the stable prefix survives
        ids.Restart();
        ids.Append(stable_prefix);
        new_tokens = rng_.UniformInt(8'000, 20'000) / options_.block_size * options_.block_size;
        AppendFresh(ids, new_tokens / options_.block_size);
        think = rng_.Uniform(1, 5);
        continue;
      }
      const bool planted_pause = index_ == 0 && turn == turns / 2;
      const bool long_pause = planted_pause || rng_.Chance(kLongPauseChance);
      if (planted_pause) {
        think = kPlantedPauseS;
      } else if (long_pause) {
        think = rng_.Uniform(5 * 60, 60 * 60);
      } else if (r.stop_reason == "end_turn") {
        think = std::min(kMaxWaitS, rng_.LogNormal(kUserWaitMedianS, kUserWaitSigma));
      } else {
        think = std::min(kMaxWaitS, rng_.LogNormal(kToolWaitMedianS, kToolWaitSigma));
      }
      new_tokens = 0;
      std::optional<size_t> keep;
      if (long_pause && rng_.Chance(kDivergeAfterLongPauseChance)) {
        // The prompt is rebuilt after the pause and matches only up to an early point.
        keep = std::min(ids.size(), stable_prefix.size() + static_cast<size_t>(rng_.UniformInt(0, 256)));
      } else if (rng_.Chance(kHistoryEditChance)) {
        keep = static_cast<size_t>(rng_.UniformInt(int64_t(stable_prefix.size()), int64_t(ids.size())));
      }
      if (keep) {
        const size_t rewritten = ids.size() - *keep;
        const std::vector<uint64_t> kept(ids.current().begin(), ids.current().begin() + *keep);
        ids.Restart();
        ids.Append(kept);
        AppendFresh(ids, rewritten);
        new_tokens += static_cast<int64_t>(rewritten) * options_.block_size;
      }
      const int64_t growth = BlocksFor(rng_.LogNormal(kGrowthTokensMedian, kGrowthTokensSigma));
      AppendFresh(ids, growth);
      new_tokens += growth * options_.block_size;
    }
    return trace;
  }

 private:
  int64_t BlocksFor(double tokens) const {
    return std::max<int64_t>(1, std::llround(tokens / static_cast<double>(options_.block_size)));
  }
  // As in real files, a prompt usually ends inside a block: the full blocks' tokens plus a
  // tail of 0..block_size-1 tokens that has no id. The tail comes from its own generator, so
  // it changes nothing else about the corpus.
  int64_t InputTokens(const BlockIds& ids) {
    const int64_t tail = static_cast<int64_t>(tail_rng_.Next() % static_cast<uint64_t>(options_.block_size));
    return static_cast<int64_t>(ids.size()) * options_.block_size + tail;
  }
  void AppendFresh(BlockIdsBuilder& ids, size_t blocks) {
    for (size_t i = 0; i < blocks; ++i) ids.Append(next_block_id_++);
  }
  int64_t OutputTokens(double median, double sigma) {
    return std::clamp<int64_t>(std::llround(rng_.LogNormal(median, sigma)), 1, kMaxOutputTokens);
  }
  static void AddModel(Trace& trace, const std::string& model) {
    if (std::find(trace.models.begin(), trace.models.end(), model) == trace.models.end()) trace.models.push_back(model);
  }

  // API time: prefill of the uncached tokens (plus a little per cached token), then decode.
  void SetTiming(Request& r, int64_t new_tokens) {
    const double ttft = 0.3 + double(new_tokens) / kPrefillTokensPerS + double(r.input_tokens) / 2e6;
    r.api_time_s = Millis(ttft + double(r.output_tokens) / kDecodeTokensPerS);
    if (rng_.Chance(kStreamingChance)) {
      r.type = RequestType::kStreaming;
      r.ttft_s = Millis(ttft);
    }
  }

  // A subagent runs until its task is done or its context nears its model's window.
  Subagent BuildSubagent(Trace& trace, double spawn_time_s, SubagentStatus status, double main_window) {
    const SubagentKind& kind = kSubagentKinds[rng_.Pick(std::array<double, 3>{
        kSubagentKinds[0].weight, kSubagentKinds[1].weight, kSubagentKinds[2].weight})];
    Subagent s;
    s.spawn_time_s = Millis(spawn_time_s);
    s.agent_id = fmt::format("a{:016x}", rng_.Next());
    s.subagent_type = kind.name;
    s.status = status;
    s.system_tokens = kind.system_tokens;
    s.tool_tokens = kind.tool_tokens;
    const std::string model = kind.uses_small_model ? "claude-haiku-4-5" : main_model_;
    const double context_limit = 0.85 * (kind.uses_small_model ? 200'000 : main_window);
    s.models = {model};
    AddModel(trace, model);

    // Subagents of one kind share their system prompt and tools, so their first blocks.
    std::vector<uint64_t>& prefix = kind_prefix_[kind.name];
    if (prefix.empty()) {
      for (int64_t i = BlocksFor(double(kind.system_tokens + kind.tool_tokens)); i > 0; --i)
        prefix.push_back(next_block_id_++);
    }
    BlockIdsBuilder ids;
    ids.Append(prefix);
    int64_t new_tokens = BlocksFor(rng_.Uniform(1'000, 12'000)) * options_.block_size;  // the task prompt
    AppendFresh(ids, new_tokens / options_.block_size);

    const int turns = std::clamp(static_cast<int>(std::lround(rng_.LogNormal(kSubagentTurnsMedian, kSubagentTurnsSigma))), 1,
                                 kMaxSubagentTurns);
    double free_at = s.spawn_time_s;
    double think = rng_.Uniform(0.05, 0.5);
    for (int turn = 0; turn < turns; ++turn) {
      Request r;
      r.start_time_s = Millis(free_at + think);
      r.think_time_s = Millis(think);
      r.model = model;
      r.hash_ids = ids.Snapshot();
      r.input_tokens = InputTokens(r.hash_ids);
      r.output_tokens = OutputTokens(200, 1.0);
      const bool last = turn + 1 == turns || double(r.input_tokens) > context_limit;
      r.stop_reason = last ? "end_turn" : "tool_use";
      SetTiming(r, new_tokens);
      free_at = r.end_time_s();
      s.total_tokens = r.input_tokens + r.output_tokens;
      s.requests.push_back(std::move(r));
      if (last) break;
      const int64_t growth = BlocksFor(rng_.LogNormal(kSubagentGrowthTokensMedian, kSubagentGrowthTokensSigma));
      AppendFresh(ids, growth);
      new_tokens = growth * options_.block_size;
      think = rng_.LogNormal(1.5, 1.0);
    }
    s.duration_ms = std::round((free_at - s.spawn_time_s) * 1000.0);
    if (status == SubagentStatus::kCompleted) s.tool_use_count = static_cast<int64_t>(s.requests.size()) - 1;
    return s;
  }

  const SynthesisOptions& options_;
  const int index_;
  Random rng_;
  Random tail_rng_;
  std::string main_model_;
  uint64_t next_block_id_ = 0;
  std::map<std::string, std::vector<uint64_t>> kind_prefix_;
};

}  // namespace

Corpus SynthesizeCorpus(const SynthesisOptions& options, uint64_t seed) {
  assert(options.traces >= 0 && options.turn_scale > 0 && options.block_size > 0);
  Corpus corpus;
  corpus.format = TraceFormat::kAgentX;
  corpus.traces.reserve(static_cast<size_t>(options.traces));
  for (int i = 0; i < options.traces; ++i) corpus.traces.push_back(TraceSynthesizer(options, seed, i).Build(seed));
  return corpus;
}

}  // namespace kvpool::trace
