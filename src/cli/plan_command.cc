// kvpool plan: how much pool a load needs (issue 18). For each pool size, the reuse a replay
// of the same sessions would see — the replay's lanes against a model of the GPU caches and the
// pool, LRU, no KV bytes (replay/pool_plan.h) — as a table, and optionally JSON and an SVG plot.
//   kvpool plan (TRACE | --synth N) --pool SIZES [--sessions N] [--duration S] [--geometry G]
//               [--json OUT] [--plot OUT.svg]
// SIZES: pool capacities in tokens, a comma list (20M,24M,32M; K, M and G are powers of 1000;
// 0 is no pool). The prediction assumes the deployment keeps up: where prefill falls behind,
// sessions come back out of order and a replay reuses less (src/replay/README.md).
// Exit status: 0; 1 when an output cannot be written; 2 on bad flags or an unusable trace input.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/plan_plot.h"
#include "cli/trace_input.h"
#include "common/file_write.h"
#include "replay/pool_plan.h"
#include "trace/reuse_ceiling.h"

namespace kvpool::cli {
namespace {

// Above this prefill load the deployment cannot serve the sessions at the pace the plan
// assumes (docs/benchmarks.md, "Capacity planner", compares plans with replays).
constexpr double kBehindLoad = 1.0;

struct PlanFlags {
  CorpusSource corpus;
  std::string pool_sizes;
  int sessions = 8;
  double duration_s = 600;
  int warmup = 2;
  uint64_t seed = 1;
  double idle_cap_s = 300;
  std::string supersede = "on";
  std::string geometry = "scaled";
  std::string topology = "1x8";
  uint64_t prefill_cache_tokens = 0;
  std::string json_out;
  std::string plot_out;
};

// "24M" -> 24,000,000 (K, M, G: powers of 1000; a fraction is allowed before one: "1.5M").
Result<uint64_t> ParseTokenCount(const std::string& text) {
  double scale = 1;
  std::string number = text;
  if (!number.empty()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(number.back())));
    if (unit == 'K' || unit == 'M' || unit == 'G') {
      scale = unit == 'K' ? 1e3 : unit == 'M' ? 1e6 : 1e9;
      number.pop_back();
    }
  }
  try {
    size_t used = 0;
    const double value = std::stod(number, &used);
    if (used == number.size() && value >= 0 && std::isfinite(value) && value * scale < 1e15) {
      return static_cast<uint64_t>(std::llround(value * scale));
    }
  } catch (const std::exception&) {
  }
  return InvalidArgument(fmt::format("--pool: '{}' is not a token count (e.g. 24M, 24000000 or 0)", text));
}

Result<std::vector<uint64_t>> ParsePoolSizes(const std::string& list) {
  std::vector<uint64_t> sizes;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    auto size = ParseTokenCount(list.substr(start, comma - start));
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
    start = comma + 1;
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

int RunPlanCommand(const PlanFlags& f) {
  auto sizes = ParsePoolSizes(f.pool_sizes);
  if (!sizes.ok()) {
    fmt::print(stderr, "kvpool plan: {}\n", sizes.status().message());
    return 2;
  }
  replay::PlanOptions o;
  auto geometry = engine::GeometryPreset(f.geometry);
  auto topology = engine::TopologyPreset(f.topology);
  if (!geometry.ok() || !topology.ok()) {
    fmt::print(stderr, "kvpool plan: {}\n", (geometry.ok() ? topology.status() : geometry.status()).message());
    return 2;
  }
  o.geometry = *geometry;
  if (f.prefill_cache_tokens) o.geometry.prefill_cache_tokens = f.prefill_cache_tokens;
  o.topology = *topology;
  o.replay.sessions = f.sessions;
  o.replay.duration_s = f.duration_s;
  o.replay.warmup_requests = f.warmup;
  o.replay.seed = f.seed;
  o.replay.idle_cap_s = f.idle_cap_s;
  o.replay.supersede = f.supersede == "on";
  auto loaded = LoadCorpusSource("plan", f.corpus, f.seed, o.geometry.max_context_tokens);
  if (!loaded.ok()) {
    fmt::print(stderr, "kvpool plan: {}\n", loaded.status().message());
    return kUnusableTraceInputExit;
  }
  if (loaded->corpus.format == trace::TraceFormat::kMooncake) {
    fmt::print(stderr, "kvpool plan: {} is a Mooncake trace; the plan replays AgentX session lanes\n",
               loaded->description);
    return kUnusableTraceInputExit;
  }
  fmt::print("corpus: {} — {} traces, reuse ceiling {:.2f}%\n", loaded->description, loaded->corpus.traces.size(),
             100 * trace::CorpusReuseCeiling(loaded->corpus).ratio());
  auto points = replay::PlanPool(loaded->corpus, o, *sizes);
  if (!points.ok()) {
    fmt::print(stderr, "kvpool plan: {}\n", points.status().message());
    return 2;
  }
  fmt::print("plan: {} sessions, {:g} s measured, {} geometry, {} (LRU; assumes prefill keeps up)\n", f.sessions,
             f.duration_s, f.geometry, f.topology);
  fmt::print("{:>12}  {:>7}  {:>9}  {:>6}  {:>8}  {:>8}  {:>12}  {:>14}\n", "pool tokens", "reuse", "GPU cache",
             "pool", "computed", "requests", "prefill load", "evicted chunks");
  nlohmann::json rows = nlohmann::json::array();
  bool behind = false;
  std::vector<PlanPlotPoint> plot;
  double ceiling = 0;
  for (const replay::PlanPoint& p : *points) {
    const replay::ReplaySummary& s = p.summary;
    fmt::print("{:>12}  {:>6.1f}%  {:>8.1f}%  {:>5.1f}%  {:>7.1f}%  {:>8}  {:>11.0f}%{}  {:>14}\n", p.pool_tokens,
               100 * s.reuse(), 100 * s.gpu_share(), 100 * s.pool_share(), 100 * s.computed_share(), s.requests,
               100 * p.prefill_load, p.prefill_load > kBehindLoad ? "!" : " ", p.pool_evicted_chunks);
    behind = behind || p.prefill_load > kBehindLoad;
    rows.push_back({{"pool_tokens", p.pool_tokens}, {"reuse", s.reuse()}, {"gpu_cache_share", s.gpu_share()},
                    {"pool_share", s.pool_share()}, {"computed_share", s.computed_share()},
                    {"ceiling", s.ceiling()}, {"requests", s.requests}, {"prompt_tokens", s.prompt_tokens},
                    {"prefill_load", p.prefill_load}, {"pool_evicted_chunks", p.pool_evicted_chunks}});
    plot.push_back({static_cast<double>(p.pool_tokens), s.reuse(), s.pool_share()});
    ceiling = std::max(ceiling, s.ceiling());
  }
  if (behind) {
    fmt::print("! prefill would need more than its capacity: there the deployment falls behind (fewer requests "
               "served, longer TTFT) and, far behind, sessions come back out of order and reuse falls below the "
               "prediction\n");
  }
  if (!f.json_out.empty()) {
    const nlohmann::json j = {{"sessions", f.sessions},     {"duration_s", f.duration_s}, {"geometry", f.geometry},
                              {"topology", f.topology},     {"seed", f.seed},             {"source", loaded->description},
                              {"points", std::move(rows)}};
    if (Status s = WriteFileWhole(f.json_out, j.dump(2) + "\n"); !s.ok()) {
      fmt::print(stderr, "kvpool plan: --json: {}\n", s.message());
      return 1;
    }
    fmt::print("wrote {}\n", f.json_out);
  }
  if (!f.plot_out.empty()) {
    const std::string title = fmt::format("Predicted reuse by pool size: {} sessions ({})", f.sessions, f.geometry);
    if (Status s = WriteFileWhole(f.plot_out, PlanPlotSvg(plot, ceiling, title)); !s.ok()) {
      fmt::print(stderr, "kvpool plan: --plot: {}\n", s.message());
      return 1;
    }
    fmt::print("wrote {}\n", f.plot_out);
  }
  return 0;
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  static PlanFlags f;
  auto* cmd = app.add_subcommand(
      "plan", "Predict the pool's reuse for each pool size from a trace: how much DRAM a load needs");
  AddCorpusSourceFlags(cmd, f.corpus, /*trace_positional=*/true);
  cmd->add_option("--pool", f.pool_sizes, "pool sizes in tokens, a comma list (e.g. 16M,24M,32M; 0: no pool)")
      ->required();
  cmd->add_option("--sessions", f.sessions, "concurrent session trees, as kvpool replay --sessions")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  cmd->add_option("--duration", f.duration_s, "emulated seconds measured after warm-up")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--warmup", f.warmup, "warm-up requests per lane after the primer (not counted)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "seed for start points, routing and the synthetic corpus")->capture_default_str();
  cmd->add_option("--idle-cap", f.idle_cap_s, "cap on every recorded wait between turns, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--supersede", f.supersede, "plan with supersession, as kvpool replay --supersede")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--geometry", f.geometry, "model geometry preset: scaled, published, tiny")
      ->check(CLI::IsMember(engine::GeometryPresetNames()))
      ->capture_default_str();
  cmd->add_option("--topology", f.topology, "1x8 or Nx8 (one router group)")->capture_default_str();
  cmd->add_option("--prefill-cache-tokens", f.prefill_cache_tokens, "GPU prefix cache per prefill instance");
  cmd->add_option("--json", f.json_out, "write the plan's points to this JSON file");
  cmd->add_option("--plot", f.plot_out, "write the plan as an SVG plot to this file");
  cmd->callback([] { ExitCode() = RunPlanCommand(f); });
}

}  // namespace kvpool::cli
