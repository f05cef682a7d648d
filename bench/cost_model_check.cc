// The emulated engine against a real model (issue 43): the turns a real model served on a GPU
// (bench/gpu/real_model_turns.py's JSON), served again by the emulated deployment
// (engine::Deployment) configured as that one-GPU deployment, so its TTFT can be set beside the
// measured one per turn. scripts/check_cost_model.py fits the cost parameters from the GPU's
// own measurements and calls this.
//
// The deployment: one prefill instance of one stage holding all 32 layers of a Llama-3-8B
// (131,072 B of KV per token: restores are timed at those bytes), chunked prefill with a budget
// larger than any prompt (transformers computes a prompt in one forward), and a first token that
// needs no handoff (prefill and decode are one GPU). The GPU run kept nothing on the GPU between
// turns, so here a filler session's prompt, as large as the GPU cache, runs (uncounted) before
// every turn and leaves none of the session's blocks cached: the pool serves what it has.
// Turn k's prompt is turn k-1's first `restored_tokens` (as the GPU run restored them) followed
// by fresh tokens up to `in_tokens`: the check is of the times, not of the reuse.
//
// usage: kvpool_cost_model_check --turns real-model-turns.json --prefill-overhead-s S
//          --prefill-s-per-token S --prefill-s-per-pair S --restore-gbps G --restore-fixed-s S
//          [--out emulated.json]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <map>

#include "bench_checks.h"
#include "client/client.h"
#include "connector/chunk_store.h"
#include "embedded/embedded_pool.h"
#include "engine/deployment.h"

namespace kvpool::bench {
namespace {

struct Turn {
  std::string trace;
  int turn = 0;
  uint64_t in_tokens = 0;
  uint64_t restored_tokens = 0;  // what the GPU run restored from the pool
};

// Llama-3-8B on one GPU: 32 layers x 8 KV heads x 128 x (K, V) x 2 B = 131,072 B per token.
// The bytes the emulator really moves are 8 per token-layer (as the scaled geometry's); restores
// are timed at the reference bytes.
engine::ModelGeometry OneGpuGeometry(uint64_t longest_prompt) {
  engine::ModelGeometry g;
  g.name = "llama3-8b-1gpu";
  g.spec.model_id = "cost-model-check";
  g.spec.kv_dtype = "bf16";
  g.spec.layout = connector::KvLayoutKind::kLatent;
  g.spec.block_tokens = 16;
  g.spec.chunk_tokens = 256;
  g.spec.stage_layers = {1};
  g.spec.bytes_per_token_per_layer = 8;
  g.reference_stage_layers = {32};
  g.reference_bytes_per_token_per_layer = 8 * 128 * 2 * 2;  // 8 KV heads x 128 x (K, V) x bf16
  g.gpus_per_prefill_instance = 1;
  g.gpus_per_decode_instance = 1;
  g.decode_dcp_ranks = 1;
  const uint64_t chunk = g.spec.chunk_tokens;
  g.prefill_cache_tokens = (longest_prompt / chunk + 2) * chunk;
  g.decode_kv_tokens = 4 * g.prefill_cache_tokens;
  g.pool_tokens = 64 * g.prefill_cache_tokens;
  g.max_batched_tokens = static_cast<uint32_t>(g.prefill_cache_tokens);
  g.max_context_tokens = static_cast<int64_t>(g.prefill_cache_tokens);
  return g;
}

std::vector<Turn> ReadTurns(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<Turn> turns;
  for (const auto& row : doc.at("turns")) {
    turns.push_back({row.at("trace").get<std::string>(), row.at("turn").get<int>(),
                     row.at("in_tokens").get<uint64_t>(), row.at("restored_tokens").get<uint64_t>()});
  }
  return turns;
}

class Emulator {
 public:
  Emulator(engine::CostModelParams cost, const engine::ModelGeometry& geometry, bool with_pool) {
    engine::DeploymentOptions o;
    o.geometry = geometry;
    o.cost = cost;
    o.run_salt = with_pool ? "pool" : "recompute";
    if (with_pool) {
      embedded::EmbeddedPoolOptions pool_options;
      pool_options.memory_bytes = geometry.pool_bytes() + (64 << 20);
      auto pool = embedded::EmbeddedPool::Start(pool_options);
      CHECK_OK(pool.status());
      pool_ = std::move(pool).value();
      client::ClientOptions co;
      co.pool.masters = {pool_->address()};
      auto c = client::Client::Connect(co);
      CHECK_OK(c.status());
      client_ = std::move(c).value();
      store_ = std::make_unique<connector::PoolChunkStore>(client_.get());
      o.pools = {store_.get()};
    }
    auto d = engine::Deployment::Create(o, &sim_);
    CHECK_OK(d.status());
    deployment_ = std::move(d).value();
  }

  engine::RequestRecord Serve(uint64_t session, std::vector<connector::TokenId> tokens, bool counted = true) {
    engine::RequestRecord got;
    deployment_->Submit({session, std::move(tokens), 1, counted}, [&](const engine::RequestRecord& r) { got = r; });
    sim_.Run();
    deployment_->WaitIdle();
    if (got.failed) {
      std::fprintf(stderr, "the emulated request failed: %s\n", got.failure.c_str());
      std::exit(2);
    }
    return got;
  }

 private:
  engine::Simulation sim_;
  std::unique_ptr<embedded::EmbeddedPool> pool_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<connector::PoolChunkStore> store_;
  std::unique_ptr<engine::Deployment> deployment_;
};

nlohmann::json RecordJson(const engine::RequestRecord& r) {
  return {{"ttft_s", r.ttft_s()}, {"pool_tokens", r.pool_tokens}, {"computed_tokens", r.computed_tokens},
          {"gpu_cached_tokens", r.gpu_cached_tokens}, {"restore_wait_s", r.restore_wait_s}};
}

}  // namespace
}  // namespace kvpool::bench

int main(int argc, char** argv) {
  using namespace kvpool;
  CLI::App app{"The emulated one-GPU deployment serving the turns a real model served"};
  std::string turns_path, out_path;
  const engine::CostModelParams published = engine::CostModelParams::Published();
  engine::CostModelParams cost = published;
  double restore_gbps = 0;
  app.add_option("--turns", turns_path, "real_model_turns.py's JSON")->required()->check(CLI::ExistingFile);
  app.add_option("--prefill-overhead-s", cost.prefill_iteration_overhead_s)->required()->check(CLI::NonNegativeNumber);
  app.add_option("--prefill-s-per-token", cost.prefill_s_per_token)->required()->check(CLI::NonNegativeNumber);
  app.add_option("--prefill-s-per-pair", cost.prefill_s_per_attention_pair)->required()->check(CLI::NonNegativeNumber);
  app.add_option("--restore-gbps", restore_gbps, "pool -> GPU, GB/s")->required()->check(CLI::PositiveNumber);
  app.add_option("--restore-fixed-s", cost.restore_fixed_s, "per restore: lookup and set-up")
      ->required()->check(CLI::NonNegativeNumber);
  app.add_option("--out", out_path, "write the JSON here (default: stdout)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // stdout is the JSON; the embedded pool's start-up lines are noise
  cost.restore_bytes_per_s_per_gpu = restore_gbps * 1e9;
  cost.handoff_fixed_s = 0;  // the first token comes from prefill's own logits
  cost.handoff_bytes_per_s = 1e30;

  const std::vector<bench::Turn> turns = bench::ReadTurns(turns_path);
  uint64_t longest = 0;
  for (const bench::Turn& t : turns) longest = std::max(longest, t.in_tokens);
  const engine::ModelGeometry geometry = bench::OneGpuGeometry(longest);
  bench::Emulator pooled(cost, geometry, true), recomputing(cost, geometry, false);

  connector::TokenId next_token = 1;
  const auto fresh = [&](std::vector<connector::TokenId>& tokens, uint64_t until) {
    while (tokens.size() < until) tokens.push_back(next_token++);
  };
  std::map<std::string, std::vector<connector::TokenId>> last_prompt;
  std::map<std::string, uint64_t> session_of;
  uint64_t filler_session = 1'000'000;
  nlohmann::json rows = nlohmann::json::array();
  for (const bench::Turn& t : turns) {
    const uint64_t session = session_of.emplace(t.trace, session_of.size() + 1).first->second;
    std::vector<connector::TokenId>& previous = last_prompt[t.trace];
    if (t.restored_tokens > previous.size()) {
      std::fprintf(stderr, "%s turn %d restored %lu tokens, more than its previous prompt's %zu\n", t.trace.c_str(),
                   t.turn, static_cast<unsigned long>(t.restored_tokens), previous.size());
      return 2;
    }
    std::vector<connector::TokenId> prompt(previous.begin(), previous.begin() + static_cast<long>(t.restored_tokens));
    fresh(prompt, t.in_tokens);
    std::vector<connector::TokenId> filler;
    fresh(filler, geometry.prefill_cache_tokens);
    pooled.Serve(filler_session++, std::move(filler), /*counted=*/false);  // the GPU keeps nothing between turns
    const engine::RequestRecord with_pool = pooled.Serve(session, prompt);
    std::vector<connector::TokenId> alone;
    fresh(alone, t.in_tokens);
    const engine::RequestRecord from_nothing = recomputing.Serve(session, std::move(alone));
    rows.push_back({{"trace", t.trace}, {"turn", t.turn}, {"in_tokens", t.in_tokens},
                    {"pool", bench::RecordJson(with_pool)}, {"recompute", bench::RecordJson(from_nothing)}});
    previous = std::move(prompt);
  }
  const nlohmann::json doc = {
      {"geometry", {{"name", geometry.name}, {"bytes_per_token", geometry.reference_bytes_per_token()},
                    {"max_batched_tokens", geometry.max_batched_tokens}}},
      {"cost", {{"prefill_iteration_overhead_s", cost.prefill_iteration_overhead_s},
                {"prefill_s_per_token", cost.prefill_s_per_token},
                {"prefill_s_per_attention_pair", cost.prefill_s_per_attention_pair},
                {"restore_bytes_per_s_per_gpu", cost.restore_bytes_per_s_per_gpu},
                {"restore_fixed_s", cost.restore_fixed_s}}},
      // What the replay's figures use, for scaling a fitted curve against (scripts/check_cost_model.py).
      {"published_prefill", {{"overhead_s", published.prefill_iteration_overhead_s},
                             {"s_per_token", published.prefill_s_per_token},
                             {"s_per_pair", published.prefill_s_per_attention_pair}}},
      {"turns", rows}};
  if (out_path.empty()) {
    std::cout << doc.dump(1) << "\n";
  } else {
    std::ofstream(out_path) << doc.dump(1) << "\n";
  }
  return 0;
}
