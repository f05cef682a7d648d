#include "replay/replay_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/file_write.h"
#include "engine/kv_cache_memory.h"
#include "engine/network_kv_handoff.h"
#include "replay/open_loop_driver.h"
#include "http/metrics_endpoint.h"
#include "replay/pool_connection.h"
#include "ssd/ssd_tier.h"

namespace kvpool::replay {
namespace {

// The SSD tier of an embedded pool for `servers` servers' share of ssd_tokens (the DRAM
// pool's rule: pool_share_per_server each), split over `parts`. The tier keeps one slot per
// stage object: a 4 KiB header and the largest stage object rounded up to 4 KiB, so the file
// is larger than the KV it holds (4x at the scaled geometry's 2 KiB objects, 0.1% at the
// published geometry's ~3 MB ones); capacity is counted in tokens, like the DRAM pool's.
EmbeddedSsd EmbeddedSsdFor(const ReplayRunOptions& options, int servers, uint32_t parts) {
  EmbeddedSsd ssd;
  if (options.ssd_tokens == 0) return ssd;
  const connector::KvModelSpec& spec = options.geometry.spec;
  constexpr uint64_t kBlock = 4096;  // the tier file's O_DIRECT alignment
  uint64_t largest = 0;
  for (uint32_t stage = 0; stage < spec.num_stages(); ++stage) {
    largest = std::max(largest, spec.stage_object_bytes(stage));
  }
  ssd.max_object_bytes = (largest + kBlock - 1) / kBlock * kBlock;
  const double tokens = static_cast<double>(options.ssd_tokens) * options.topology.pool_share_per_server * servers;
  const auto chunks = static_cast<uint64_t>(std::ceil(tokens / spec.chunk_tokens));
  const uint64_t slots_per_part = (chunks * spec.num_stages() + parts - 1) / parts;
  ssd.bytes = slots_per_part * (ssd::SsdTier::kHeaderBytes + ssd.max_object_bytes) * parts;
  ssd.dir = options.ssd_dir;
  return ssd;
}

}  // namespace

Result<ReplaySummary> RunReplay(const trace::Corpus& corpus, const ReplayRunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.gpus > 0) {
    const int present = engine::CudaDeviceCount();
    if (present < options.gpus) {
      return Unavailable(present == 0 ? "--gpu: no CUDA device (or this kvpool was built without KVPOOL_CUDA)"
                                      : fmt::format("--gpu: {} CUDA devices asked for, {} present", options.gpus,
                                                    present));
    }
  }
  const std::string handoff_name = !options.handoff.empty() ? options.handoff : options.gpus > 0 ? "gpu" : "network";
  if (handoff_name == "gpu" && options.gpus == 0) {
    return InvalidArgument("the gpu handoff needs --gpu (caches in device memory)");
  }
  if (handoff_name == "cpu" && options.gpus > 0) {
    return InvalidArgument("the cpu handoff reads host memory; with --gpu use gpu or network");
  }
  std::unique_ptr<engine::KvHandoff> handoff;
  if (handoff_name == "network") {
    handoff = engine::NewNetworkKvHandoff({.ucx = options.ucx});
  } else if (handoff_name == "cpu") {
    handoff = engine::NewCpuKvHandoff();
  } else if (handoff_name == "gpu") {
    auto gpu = engine::NewGpuKvHandoff();
    if (!gpu.ok()) return gpu.status();
    handoff = std::move(gpu).value();
  } else {
    return InvalidArgument(fmt::format("unknown handoff '{}' (network, cpu or gpu)", handoff_name));
  }
  const engine::Topology& topology = options.topology;
  const bool split = options.pool_scope == "split";
  if (!split && options.pool_scope != "shared") {
    return InvalidArgument(fmt::format("unknown pool scope '{}' (shared or split)", options.pool_scope));
  }
  if (split && options.pool) {
    return InvalidArgument("a split pool needs one pool per server (server pools), not one pool");
  }
  if (split && !options.server_pools.empty() && options.server_pools.size() != static_cast<size_t>(topology.servers)) {
    return InvalidArgument(fmt::format("a split pool on {} servers needs {} server pools, not {}", topology.servers,
                                       topology.servers, options.server_pools.size()));
  }
  if (!options.metrics_file.empty()) {
    const Status writable = CheckWritablePath(options.metrics_file);
    if (!writable.ok()) return InvalidArgument("--metrics-file " + writable.message());
  }
  if (options.ssd_tokens > 0 && (options.pool || !options.server_pools.empty())) {
    return InvalidArgument("an SSD tier size is for the embedded pools; an existing pool's stores have their own "
                           "(kvpool store --ssd)");
  }
  // The pools run on the simulation's clock: declared before them, it outlives their timers.
  engine::Simulation sim(options.speedup);
  std::vector<std::unique_ptr<PoolConnection>> pools;  // one shared, or one per server
  if (options.use_pool) {
    // One server keeps its one-part pool; several split theirs by rail, as published.
    const uint32_t parts = topology.servers > 1 ? static_cast<uint32_t>(topology.rails) : 1;
    const uint64_t server_bytes = topology.pool_tokens_per_server(options.geometry) * options.geometry.bytes_per_token();
    for (int k = 0; k < (split ? topology.servers : 1); ++k) {
      auto p = split && !options.server_pools.empty()
                   ? PoolConnection::Connect(options.server_pools[k], options.credentials, options.read_lease, options.ucx)
               : options.pool ? PoolConnection::Connect(*options.pool, options.credentials, options.read_lease, options.ucx)
                              : PoolConnection::StartEmbedded({.memory_bytes = split ? server_bytes : server_bytes * topology.servers,
                                                               .parts = parts,
                                                               .ssd = EmbeddedSsdFor(options, split ? 1 : topology.servers, parts),
                                                               .read_lease = options.read_lease,
                                                               .max_retained_fraction = options.max_retained_fraction,
                                                               .clock = sim.clock()});
      if (!p.ok()) return p.status();
      spdlog::debug("replay: {}", (*p)->description());
      pools.push_back(std::move(p).value());
    }
  }
  engine::DeploymentOptions d;
  d.handoff = handoff.get();
  d.geometry = options.geometry;
  d.topology = topology;
  d.cost = options.cost;
  d.admission_timeout_s = options.admission_timeout_s;
  d.prefetch_share = options.prefetch_share;
  d.oracle_gate = options.oracle_gate;
  for (auto& p : pools) d.pools.push_back(p->store());
  d.devices.gpus = options.gpus;
  // A fresh key space per run: runs sharing an existing pool never hit each other's chunks.
  // An embedded pool is the run's own: the same keys every time, as the same seed must give.
  const bool existing_pool = options.pool || !options.server_pools.empty();
  d.run_salt = existing_pool ? fmt::format("run-{}-{}", std::chrono::system_clock::now().time_since_epoch().count(),
                                           options.replay.seed)
                             : fmt::format("run-{}", options.replay.seed);
  d.seed = options.replay.seed;
  auto deployment = engine::Deployment::Create(std::move(d), &sim);
  if (!deployment.ok()) return deployment.status();
  std::unique_ptr<TraceDriver> driver;
  const ReplayDriver* closed_loop = nullptr;
  if (options.open_loop) {
    driver = std::make_unique<OpenLoopDriver>(corpus, options.replay, deployment->get(), &sim);
  } else {
    auto replay = std::make_unique<ReplayDriver>(corpus, options.replay, deployment->get(), &sim);
    closed_loop = replay.get();
    driver = std::move(replay);
  }
  const auto append_metrics = [connectors = (*deployment)->connector_metrics(),
                                handoff = &(*deployment)->handoff_metrics(), &pools](std::string* body) {
    connector::ConnectorMetrics::AppendPrometheus(connectors, body);
    handoff->AppendPrometheus(body);
    std::vector<const transfer::TransferMetrics*> transfers;
    for (const auto& p : pools) transfers.push_back(&p->transfer_metrics());
    transfer::TransferMetrics::AppendPrometheus(transfers, body);
  };
  // Declared after the deployment and the pools, whose metrics its handler reads: gone before them.
  std::unique_ptr<http::MetricsEndpoint> metrics;
  if (!options.metrics_listen.empty()) {
    auto started = http::MetricsEndpoint::StartMetricsAndHealth(options.metrics_listen, append_metrics,
                                                                [] { return std::string("ok\n"); });
    if (!started.ok()) return started.status();
    metrics = std::move(started).value();
    spdlog::info("replay: connector metrics on http://{}:{}/metrics",
                 options.metrics_listen.substr(0, options.metrics_listen.rfind(':')), metrics->port());
  }
  KVPOOL_RETURN_IF_ERROR(driver->Start());
  const auto progress = [&] {
    if (!options.on_progress) return;
    ReplayProgress p;
    p.emulated_s = sim.now();
    p.warm = driver->window_open();
    p.window_start_s = p.warm ? driver->window_start_s() : 0;
    p.requests = driver->counted_finished();
    p.in_flight = (*deployment)->in_flight();
    p.lanes_warm = driver->lanes_warm();
    p.metrics_port = metrics ? metrics->port() : 0;
    options.on_progress(p);
  };
  sim.Run(progress);
  (*deployment)->WaitIdle();  // late reads of restores that timed out move the metrics until done
  progress();  // the last word: what the run ended with
  if (!options.metrics_file.empty()) {
    std::string text;
    append_metrics(&text);
    KVPOOL_RETURN_IF_ERROR(WriteFileWhole(options.metrics_file, text));
  }
  ReplaySummary s = Summarize(driver->records(), driver->window_start_s(), driver->window_end_s(),
                              topology.total_gpus(options.geometry));
  s.mode = options.use_pool ? "pool" : "no-pool";
  s.pool_scope = options.use_pool && topology.servers > 1 ? options.pool_scope : "";
  s.geometry = options.geometry.name;
  s.topology = topology.name;
  s.servers = topology.servers;
  s.sessions = options.open_loop ? 0 : options.replay.sessions;
  s.arrival_rate = options.open_loop ? 0 : options.replay.arrival_rate;
  s.prefill = options.geometry.prefill_tensor_parallel ? "tp4" : "pp4";
  s.speedup = options.speedup;
  s.max_lag_s = sim.max_lag_s();
  s.kv_memory = options.gpus > 0 ? fmt::format("{} CUDA device{}", options.gpus, options.gpus > 1 ? "s" : "") : "host";
  s.handoff = handoff->name();
  s.max_tokens = options.replay.max_output_tokens;
  s.gate_reserves = options.oracle_gate || s.max_tokens == 0 ? "recorded output" : "max_tokens";
  if (options.oracle_gate) s.gate_reserves += " (oracle)";
  s.traces_skipped = driver->traces_skipped();
  if (closed_loop && options.replay.retention == ReplayOptions::Retention::kPredicted && options.use_pool) {
    s.return_predictions = closed_loop->return_predictions();
  }
  s.deployment = (*deployment)->counters(driver->window_start_s(), driver->window_end_s());
  for (const auto& p : pools) {
    if (const auto c = p->counters()) (s.pool_counters ? *s.pool_counters : s.pool_counters.emplace()) += *c;
  }
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace kvpool::replay
