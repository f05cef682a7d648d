// kvpool replay: replay agent sessions against an emulated P/D deployment that saves KV to
// and restores KV from the pool (src/replay/README.md).
//   kvpool replay (--trace PATH | --synth N) [--sessions 8[,16,...]] [--duration S] [--requests N]
//                 [--mode pool|no-pool|both] [--geometry scaled|published|tiny] [--speedup X]
//                 [--topology 1x8|Nx8|4x8-6p2d] [--pool-scope shared|split|both] [--prefill pp4|tp4]
//                 [--arrival open|closed|poisson --rate R[,R...]] [--master HOST:PORT] [--json OUT]
// One run per (sessions, rate, arm): arms (pool scopes, no pool) are compared at each load. Without --master each
// pool run starts its own embedded pool (master + storage service in this process, sized by
// the geometry); KVPOOL_MASTER/KVPOOL_POOL/KVPOOL_ETCD are not read (cli/pool_flags.h says
// why), and the first line says which pool the replay uses. A progress line is drawn on stderr when it is a terminal. Invalid traces are
// skipped with one line each on stderr (--strict: the first is fatal). Exit status: 0, 1 on
// a failed run, 2 on bad flags or an unusable trace input (missing, empty, no loadable trace
// or none within the context), 3 when any KV byte failed verification or any request failed
// (the results are still printed and written).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "cli/pool_flags.h"
#include "cli/trace_input.h"
#include "engine/kv_cache_memory.h"
#include "master/pool_metadata.h"
#include "replay/replay_run.h"
#include "trace/reuse_ceiling.h"

namespace kvpool::cli {
namespace {

// --prefetch on: the share of a prefill instance's GPU cache prefetched requests may hold. Enough
// for the next few requests to start (their restores then overlap the queue ahead of them); more
// takes blocks the prefix cache would have kept. Probed at 112 sessions, a 24M-token pool, 300 s:
// 27.3K tok/s per GPU without prefetch, 27.1K at 5%, 25.3K at 10%, 23.4K at 25% (emulated).
constexpr double kPrefetchShare = 0.05;

struct ReplayFlags {
  CorpusSource corpus;
  std::string sessions = "8";
  double duration_s = 600;
  int64_t requests = 0;
  std::string mode = "both";
  std::string geometry = "scaled";
  std::string topology = "1x8";
  std::string pool_scope = "shared";
  std::string router;  // "": the topology's
  double ramp_s = 0;
  double speedup = 0;
  PoolFlags pool;
  std::string server_pool_files;  // split pools on existing pools: one pool file per server
  std::string handoff;  // "": gpu with --gpu, network otherwise
  bool gpu = false;
  std::string json_out;
  int warmup = 2;
  uint64_t seed = 1;
  uint64_t prefill_cache_tokens = 0, decode_kv_tokens = 0, pool_tokens = 0;
  uint64_t ssd_tokens = 0;  // the embedded pool's SSD tier (0: none)
  double max_retained_fraction = master::PoolOptions{}.max_retained_fraction;  // the embedded pool's
  double ssd_gbps = engine::CostModelParams::Published().ssd_read_bytes_per_s_per_gpu / 1e9;
  std::string ssd_dir;
  double idle_cap_s = 300;
  std::string retention = "lru";
  std::string prefetch = "off";
  std::string gate_reserve = "max-tokens";
  std::string supersede = "on";
  int64_t read_lease_ms = 0;
  std::string metrics_listen;  // "": no /metrics
  std::string metrics_file;    // "": none
  uint32_t decode_dcp = 0, dcp_interleave = 0;  // 0: the geometry's
  std::string arrival;  // "": open for Mooncake traces, closed otherwise
  double rate_scale = 1;
  std::string rates;  // --arrival poisson: requests/s, a comma list sweeps
  std::string prefill_cost;  // "": the published calibration's
  std::string prefill = "pp4";
  uint32_t max_batched_tokens = 0;  // 0: 8,192 for pp4, 16,384 for tp4
  double admission_wait_s = 900;
  int64_t max_output = 0;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// A comma list of positive numbers (--sessions, --rate). Errors name the flag, say what a
// number must be ("a positive number" + `unit`) and, for an empty list, what to give (`noun`).
template <typename T>
Result<std::vector<T>> ParsePositiveList(const std::string& text, const char* flag, const char* unit,
                                         const char* noun) {
  std::vector<T> out;
  for (const std::string& item : SplitCommas(text)) {
    try {
      size_t used = 0;
      T n;
      if constexpr (std::is_integral_v<T>) {
        n = std::stoi(item, &used);
      } else {
        n = std::stod(item, &used);
      }
      if (used != item.size() || !(n > 0)) throw std::invalid_argument(item);
      out.push_back(n);
    } catch (const std::exception&) {
      return InvalidArgument(fmt::format("{}: '{}' is not a positive number{}", flag, item, unit));
    }
  }
  if (out.empty()) return InvalidArgument(fmt::format("{}: give at least one {}", flag, noun));
  return out;
}

// The replay's first line: which pool it uses, and the KVPOOL_* variables it did not read
// (pool_flags.h says why a replay reads none).
std::string DescribePool(const NamedPool& named, const ReplayFlags& f) {
  std::string line;
  if (f.mode == "no-pool") {
    line = "pool: none (--mode no-pool)";
  } else if (named.parts) {
    line = fmt::format("pool: the running pool {} ({})", named.parts->ToString(), named.source);
  } else if (!f.server_pool_files.empty()) {
    line = "pool: a running pool per server (--server-pool-files)";
  } else {
    line = "pool: embedded (a master and a storage service in this process, started for each run)";
  }
  const std::vector<std::string> unread = UnreadPoolVariables(f.pool);
  if (!unread.empty()) {
    line += fmt::format("; {} set but not read: a replay's pool is named on its command line (--master, --pool, "
                        "--pool-file, --etcd)",
                        fmt::join(unread, ", "));
  }
  return line;
}

void DrawProgress(const std::string& label, const replay::ReplayProgress& p, double duration_s) {
  std::string where = p.warm ? fmt::format("measuring {:.0f}/{:.0f} s", p.emulated_s - p.window_start_s, duration_s)
                             : fmt::format("warming up ({} lanes ready)", p.lanes_warm);
  std::fprintf(stderr, "\r\033[K%s: t=%.0f s emulated · %s · %lld requests · %zu in flight", label.c_str(),
               p.emulated_s, where.c_str(), static_cast<long long>(p.requests), p.in_flight);
  std::fflush(stderr);
}

int RunReplayCommand(const ReplayFlags& f) {
  auto sessions = ParsePositiveList<int>(f.sessions, "--sessions", "", "number");
  if (!sessions.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", sessions.status().message());
    return 2;
  }
  auto geometry = engine::GeometryPreset(f.geometry);
  if (!geometry.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", geometry.status().message());
    return 2;
  }
  if (f.prefill_cache_tokens) geometry->prefill_cache_tokens = f.prefill_cache_tokens;
  if (f.decode_kv_tokens) geometry->decode_kv_tokens = f.decode_kv_tokens;
  if (f.decode_dcp) geometry->decode_dcp_ranks = f.decode_dcp;
  if (f.dcp_interleave) geometry->decode_dcp_interleave = f.dcp_interleave;
  if (f.pool_tokens) geometry->pool_tokens = f.pool_tokens;
  geometry->prefill_tensor_parallel = f.prefill == "tp4";
  geometry->max_batched_tokens = f.max_batched_tokens ? f.max_batched_tokens : f.prefill == "tp4" ? 16'384 : 8'192;
  auto topology = engine::TopologyPreset(f.topology);
  if (!topology.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", topology.status().message());
    return 2;
  }
  if (!f.router.empty()) topology->router_session_affinity = f.router == "affinity";
  if (Status valid = topology->Validate(*geometry); !valid.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", valid.message());
    return 2;
  }

  const bool paced = f.arrival == "poisson";
  if (paced != !f.rates.empty()) {
    fmt::print(stderr, "kvpool replay: --arrival poisson and --rate go together\n");
    return 2;
  }
  std::vector<double> rates = {0};  // 0: not paced
  if (paced) {
    auto parsed = ParsePositiveList<double>(f.rates, "--rate", " of requests/s", "rate");
    if (!parsed.ok()) {
      fmt::print(stderr, "kvpool replay: {}\n", parsed.status().message());
      return 2;
    }
    rates = std::move(parsed).value();
  }

  engine::CostModelParams cost = engine::CostModelParams::Published();
  cost.ssd_read_bytes_per_s_per_gpu = f.ssd_gbps * 1e9;
  if (!f.prefill_cost.empty()) {
    auto parsed = ParsePositiveList<double>(f.prefill_cost, "--prefill-cost", " of seconds", "cost");
    if (parsed.ok() && parsed->size() != 3) {
      parsed = InvalidArgument("--prefill-cost: give three numbers, OVERHEAD_S,S_PER_TOKEN,S_PER_PAIR");
    }
    if (!parsed.ok()) {
      fmt::print(stderr, "kvpool replay: {}\n", parsed.status().message());
      return 2;
    }
    cost.prefill_iteration_overhead_s = (*parsed)[0];
    cost.prefill_s_per_token = (*parsed)[1];
    cost.prefill_s_per_attention_pair = (*parsed)[2];
  }

  const auto named_pool = ResolvePool(f.pool);
  if (!named_pool.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", named_pool.status().ToString());
    return 2;
  }
  const std::optional<client::PoolParts>& pool = named_pool->parts;
  fmt::print("{}\n", DescribePool(*named_pool, f));

  auto loaded = LoadCorpusSource("replay", f.corpus, f.seed, geometry->max_context_tokens);
  if (!loaded.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", loaded.status().message());
    return kUnusableTraceInputExit;
  }
  const trace::Corpus& corpus = loaded->corpus;
  const std::string& source = loaded->description;
  const trace::ReuseCeiling ceiling = trace::CorpusReuseCeiling(corpus);
  fmt::print("corpus: {} — {} traces, reuse ceiling {:.2f}%\n", source, corpus.traces.size(), 100 * ceiling.ratio());

  // Mooncake files are timestamped requests: replayed by timestamp (agentx-format.md §2).
  const bool open_loop =
      f.arrival.empty() ? corpus.format == trace::TraceFormat::kMooncake : f.arrival == "open";
  if (open_loop && sessions->size() > 1) {
    fmt::print(stderr, "kvpool replay: --sessions sweeps closed-loop session lanes; an open-loop replay has none "
                       "(use --rate-scale to change the load)\n");
    return 2;
  }
  if (paced && corpus.format == trace::TraceFormat::kMooncake) {
    fmt::print(stderr, "kvpool replay: --arrival poisson paces session lanes; a Mooncake trace has none\n");
    return 2;
  }
  const auto credentials = ClientCredentials(f.pool.security);
  if (!credentials.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", credentials.status().ToString());
    return 2;
  }
  const auto ucx = TransportSettings(f.pool);
  if (!ucx.ok()) {
    fmt::print(stderr, "kvpool replay: {}\n", ucx.status().ToString());
    return 2;
  }
  // The arms of one load point: the pool (one per scope) and the GPU cache alone.
  struct Arm {
    bool use_pool;
    std::string scope;
  };
  std::vector<Arm> arms;
  if (f.mode == "pool" || f.mode == "both") {
    if (f.pool_scope == "shared" || f.pool_scope == "both") arms.push_back({true, "shared"});
    if (f.pool_scope == "split" || f.pool_scope == "both") arms.push_back({true, "split"});
  }
  if (f.mode == "no-pool" || f.mode == "both") arms.push_back({false, "shared"});
  if (f.pool_scope != "shared" && topology->servers == 1) {
    fmt::print(stderr, "kvpool replay: --pool-scope {} needs several servers (--topology 4x8-6p2d)\n", f.pool_scope);
    return 2;
  }
  if (f.pool_scope == "split" && pool.has_value()) {
    fmt::print(stderr, "kvpool replay: a split pool is one pool per server: give --server-pool-files, not "
                       "--master/--pool/--pool-file\n");
    return 2;
  }
  if (f.max_retained_fraction != master::PoolOptions{}.max_retained_fraction &&
      (pool.has_value() || !f.server_pool_files.empty())) {
    fmt::print(stderr, "kvpool replay: --max-retained-fraction is the embedded pool's; an existing pool's masters "
                       "have their own (kvpool master --max-retained-fraction)\n");
    return 2;
  }
  if (f.ssd_tokens > 0 && (pool.has_value() || !f.server_pool_files.empty())) {
    fmt::print(stderr, "kvpool replay: --ssd-tokens sizes the embedded pool's SSD tier; an existing pool's stores "
                       "have their own (kvpool store --ssd)\n");
    return 2;
  }
  std::vector<client::PoolParts> server_pools;
  if (!f.server_pool_files.empty()) {
    if (f.pool_scope == "shared") {
      fmt::print(stderr, "kvpool replay: --server-pool-files are the split arm's pools (--pool-scope split|both)\n");
      return 2;
    }
    for (const std::string& file : SplitCommas(f.server_pool_files)) {
      auto parts = client::ReadPoolFile(file);
      if (!parts.ok()) {
        fmt::print(stderr, "kvpool replay: --server-pool-files: {}\n", parts.status().ToString());
        return 2;
      }
      server_pools.push_back(*std::move(parts));
    }
    if (server_pools.size() != static_cast<size_t>(topology->servers)) {
      fmt::print(stderr, "kvpool replay: --server-pool-files: {} files for {} servers (one per server, in order)\n",
                 server_pools.size(), topology->servers);
      return 2;
    }
  } else if (f.pool_scope == "both" && pool.has_value()) {
    fmt::print(stderr, "kvpool replay: --pool-scope both with an existing pool also needs --server-pool-files "
                       "for the split arm\n");
    return 2;
  }
  const bool tty = isatty(fileno(stderr));
  nlohmann::json runs = nlohmann::json::array();
  bool clean = true;
  // The load points: every (sessions, rate), each run in every arm.
  std::vector<std::pair<int, double>> loads;
  for (int n : *sessions) {
    for (double rate : rates) loads.emplace_back(n, rate);
  }
  for (const auto& [n, rate] : loads) {
    for (const Arm& arm : arms) {
      const bool use_pool = arm.use_pool;
      replay::ReplayRunOptions o;
      o.geometry = *geometry;
      o.topology = *topology;
      o.pool_scope = arm.scope;
      o.replay.sessions = n;
      o.replay.duration_s = f.duration_s;
      o.replay.max_requests = f.requests;
      o.replay.warmup_requests = f.warmup;
      o.replay.ramp_s = f.ramp_s;
      o.replay.idle_cap_s = f.idle_cap_s;
      o.replay.retention = f.retention == "session"  ? replay::ReplayOptions::Retention::kPredicted
                           : f.retention == "oracle" ? replay::ReplayOptions::Retention::kOracle
                                                     : replay::ReplayOptions::Retention::kLru;
      o.ssd_tokens = f.ssd_tokens;
      o.max_retained_fraction = f.max_retained_fraction;
      o.ssd_dir = f.ssd_dir;
      o.cost = cost;
      o.metrics_listen = f.metrics_listen;
      o.metrics_file = f.metrics_file;
      o.replay.seed = f.seed;
      o.speedup = f.speedup;
      o.use_pool = use_pool;
      o.pool = arm.scope == "split" ? std::nullopt : pool;
      if (arm.scope == "split") o.server_pools = server_pools;
      o.credentials = *credentials;
      o.ucx = *ucx;
      o.open_loop = open_loop;
      o.replay.rate_scale = f.rate_scale;
      o.replay.arrival_rate = rate;
      o.replay.max_output_tokens = f.max_output;
      o.admission_timeout_s = f.admission_wait_s;
      o.prefetch_share = f.prefetch == "on" ? kPrefetchShare : 0;
      o.oracle_gate = f.gate_reserve == "oracle";
      o.replay.supersede = f.supersede == "on";
      o.read_lease = std::chrono::milliseconds(f.read_lease_ms);
      o.handoff = f.handoff;
      o.gpus = f.gpu ? engine::CudaDeviceCount() : 0;
      if (f.gpu && o.gpus == 0) {
        fmt::print(stderr, "kvpool replay: --gpu: no CUDA device visible (or kvpool was built without KVPOOL_CUDA)\n");
        return 1;
      }
      const std::string load = open_loop  ? std::string("open loop")
                               : rate > 0 ? fmt::format("{} sessions at {:g} req/s", n, rate)
                                          : fmt::format("{} sessions", n);
      const std::string label =
          fmt::format("{}, {}", load,
                      !use_pool ? "no pool" : topology->servers > 1 ? arm.scope + " pool" : "pool");
      if (tty) o.on_progress = [&](const replay::ReplayProgress& p) { DrawProgress(label, p, f.duration_s); };
      auto summary = replay::RunReplay(corpus, o);
      if (tty) std::fprintf(stderr, "\r\033[K");
      if (!summary.ok()) {
        fmt::print(stderr, "kvpool replay: {}: {}\n", label, summary.status().ToString());
        return 1;
      }
      fmt::print("{}", replay::FormatSummary(*summary));
      std::fflush(stdout);
      clean = clean && summary->verification_errors == 0 && summary->failed_requests == 0;
      nlohmann::json j = replay::SummaryToJson(*summary);
      j["corpus"] = {{"source", source}, {"traces", corpus.traces.size()}, {"ceiling", ceiling.ratio()}};
      runs.push_back(std::move(j));
    }
  }
  if (!f.json_out.empty()) {
    std::ofstream out(f.json_out);
    out << nlohmann::json{{"runs", runs}}.dump(2) << "\n";
    if (!out) {
      fmt::print(stderr, "kvpool replay: cannot write {}\n", f.json_out);
      return 1;
    }
    fmt::print("wrote {}\n", f.json_out);
  }
  // Wrong bytes or failed requests are a failed run, whatever the throughput.
  return clean ? 0 : 3;
}

}  // namespace

void AddReplayCommand(CLI::App& app) {
  static ReplayFlags f;
  auto* cmd = app.add_subcommand(
      "replay", "Replay agent sessions against an emulated P/D deployment with real KV movement through the pool");
  AddCorpusSourceFlags(cmd, f.corpus, /*trace_positional=*/false);
  cmd->add_option("--sessions", f.sessions, "concurrent session trees; a comma list runs a sweep (e.g. 56,72,96,112)")
      ->capture_default_str();
  cmd->add_option("--duration", f.duration_s, "emulated seconds to measure after warm-up; 0 = until --requests")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--requests", f.requests, "stop after this many counted requests; 0 = no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--mode", f.mode, "pool, no-pool (GPU prefix cache only) or both")
      ->check(CLI::IsMember({"pool", "no-pool", "both"}))
      ->capture_default_str();
  cmd->add_option("--geometry", f.geometry, "model geometry preset: scaled, published, tiny")
      ->check(CLI::IsMember(engine::GeometryPresetNames()))
      ->capture_default_str();
  cmd->add_option("--topology", f.topology,
                  "servers and engines: 1x8 (one 8-GPU server: 1 prefill + 1 decode), Nx8 (N such servers), "
                  "4x8-6p2d (the published four-server cluster: 6 prefill + 2 decode in two groups)")
      ->capture_default_str();
  cmd->add_option("--pool-scope", f.pool_scope,
                  "with several servers: shared (one pool over every server's memory, split by rail into parts), "
                  "split (each server its own pool, used only by its own prefill instances) or both")
      ->check(CLI::IsMember({"shared", "split", "both"}))
      ->capture_default_str();
  cmd->add_option("--router", f.router,
                  "how a group's router picks a prefill instance: affinity (a session sticks to its first; the "
                  "default on one server) or p2c (power of two choices for every request; the default of 4x8-6p2d)")
      ->check(CLI::IsMember({"affinity", "p2c"}));
  cmd->add_option("--speedup", f.speedup,
                  "emulated seconds per wall second (trace waits and compute alike); 0 = as fast as possible")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddPoolFlags(cmd, f.pool, "use the pool at this master instead of an embedded one", PoolEnvironment::kIgnore);
  cmd->add_option("--server-pool-files", f.server_pool_files,
                  "the split arm on existing pools: one pool file per server, comma-separated in server order "
                  "(scripts/cluster.sh with POOLS=split writes them)");
  cmd->add_option("--handoff", f.handoff,
                  "prefill -> decode KV path: network (gather, <= 8 MiB writes into a landing segment, scatter; "
                  "with --gpu the gather and scatter are kernels on the caches' GPUs), cpu (a memcpy per token-layer; "
                  "host memory only) or gpu (gather kernel, peer copies, scatter kernel; --gpu only). "
                  "Default: gpu with --gpu, network otherwise")
      ->check(CLI::IsMember({"network", "cpu", "gpu"}));
  cmd->add_flag("--gpu", f.gpu,
                "keep the paged KV caches in GPU memory (every visible CUDA device: prefill stages on the first "
                "half, decode on the second) and move KV with CUDA kernels; needs a KVPOOL_CUDA build");
  cmd->add_option("--json", f.json_out, "write every run's results to this JSON file");
  cmd->add_option("--warmup", f.warmup, "warm-up requests per lane after the primer (not counted)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--ramp", f.ramp_s,
                  "spread the lanes' starts over this many emulated seconds (0: every lane at once)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "seed for start points, routing and the synthetic corpus")->capture_default_str();
  cmd->add_option("--arrival", f.arrival,
                  "open: every request at its recorded time (the default for Mooncake traces); closed: session "
                  "lanes, each turn after the previous answer (the default for AgentX traces); poisson: session "
                  "lanes whose main turns are paced by Poisson arrivals at --rate")
      ->check(CLI::IsMember({"open", "closed", "poisson"}));
  cmd->add_option("--rate", f.rates,
                  "--arrival poisson: requests/s over all lanes; a comma list runs a sweep (e.g. 0.6,0.8,1.0)");
  cmd->add_option("--prefill", f.prefill,
                  "prefill engine: pp4 (4 pipeline stages; a request's chunks go through them one after another) "
                  "or tp4 (4 GPUs tensor-parallel, no pipeline)")
      ->check(CLI::IsMember({"pp4", "tp4"}))
      ->capture_default_str();
  cmd->add_option("--max-batched-tokens", f.max_batched_tokens,
                  "chunked-prefill budget per micro-batch (default 8,192 with pp4, 16,384 with tp4)")
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--admission-wait", f.admission_wait_s,
                  "seconds a request may wait at the KV admission gate before it fails")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-output", f.max_output,
                  "each request's max_tokens: it generates its recorded output capped at this (the production replay "
                  "asks for 32000); 0: each asks for exactly its recorded output, as the published AgentX harness does")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--supersede", f.supersede,
                  "supersession: on releases a thread's earlier chunks that its next prompt no longer continues "
                  "(after auto-compaction or a divergence), to be evicted first; off keeps them in LRU order")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--gate-reserve", f.gate_reserve,
                  "what the KV admission gate reserves for a request's output: max-tokens (what its client asked for "
                  "at most), or oracle (the length it will generate, which only the trace knows)")
      ->check(CLI::IsMember({"max-tokens", "oracle"}))
      ->capture_default_str();
  cmd->add_option("--rate-scale", f.rate_scale, "open loop: multiply the trace's request rate by this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--decode-dcp", f.decode_dcp,
                  "decode context-parallel ranks per decode instance (default 4: TP4+DCP4); each holds every layer of "
                  "its share of the tokens")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dcp-interleave", f.dcp_interleave,
                  "tokens in a row per DCP rank (default 1: token g on rank g mod ranks)")
      ->check(CLI::Range(1, 1 << 20));
  auto* caps = cmd->add_option_group("capacity overrides (tokens)");
  caps->add_option("--prefill-cache-tokens", f.prefill_cache_tokens, "GPU prefix cache per prefill instance");
  caps->add_option("--decode-kv-tokens", f.decode_kv_tokens, "KV tokens per decode instance (admission gate)");
  caps->add_option("--pool-tokens", f.pool_tokens, "pool capacity");
  caps->add_option("--ssd-tokens", f.ssd_tokens,
                   "an SSD tier of this many tokens under the embedded pool's DRAM (0: none; issue 17)");
  cmd->add_option("--ssd-gbps", f.ssd_gbps,
                  "emulated: GB/s at which one stage GPU's restore reads chunks found on the SSD tier")
      ->check(CLI::Range(0.01, 1000.0))
      ->capture_default_str();
  cmd->add_option("--prefill-cost", f.prefill_cost,
                  "emulated: OVERHEAD_S,S_PER_TOKEN,S_PER_PAIR of a prefill micro-batch on the busiest stage, "
                  "instead of the published calibration's (src/engine/cost_model.cc; docs/benchmarks.md's cost-model "
                  "check derives a set from the real model's)");
  cmd->add_option("--ssd-dir", f.ssd_dir, "folder for the embedded pool's SSD tier files (default: its temporary folder)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--metrics-listen", f.metrics_listen,
                  "HTTP address for the run's /metrics (the connectors' counters and latency histograms, the "
                  "handoffs', the transfer request sizes), e.g. 127.0.0.1:9466");
  cmd->add_option("--metrics-file", f.metrics_file,
                  "write the same Prometheus text to this file when a run ends (e.g. for node_exporter's "
                  "textfile collector; a sweep leaves its last run's)");
  cmd->add_option("--idle-cap", f.idle_cap_s, "cap on every recorded wait between turns, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--retention", f.retention,
                  "the pool's eviction: lru; session (the router tells the pool which sessions wait and when each "
                  "is expected back, predicted from the waits it has seen: waiting sessions' histories are kept "
                  "over others', the one expected last evicted first); or oracle (the same from the trace's "
                  "recorded waits and ends, which no router knows: an upper bound for comparison only)")
      ->check(CLI::IsMember({"lru", "session", "oracle"}))
      ->capture_default_str();
  cmd->add_option("--max-retained-fraction", f.max_retained_fraction,
                  "the embedded pool's bound on retention hints (kvpool master --max-retained-fraction): the "
                  "share of its eviction units the router's hints may keep over the rest")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--prefetch", f.prefetch,
                  "restore prefetch: on starts a request's restore from the pool when it arrives, overlapping its "
                  "waits (prefetched requests hold at most 5% of a prefill instance's GPU cache); off "
                  "restores when prefill starts it")
      ->check(CLI::IsMember({"off", "on"}))
      ->capture_default_str();
  cmd->add_option("--read-lease-ms", f.read_lease_ms,
                  "the read lease a restore's lookup asks for, in milliseconds of the pool's time (emulated for "
                  "the embedded pool, which runs on the replay's clock; 0: the master's default, 5 s)")
      ->check(CLI::Range(int64_t{0}, int64_t{60'000}))
      ->capture_default_str();
  AddConfigFile(cmd);
  cmd->callback([cmd] {
    if (PrintedConfig(cmd)) return;
    ExitCode() = RunReplayCommand(f);
  });
}

}  // namespace kvpool::cli
