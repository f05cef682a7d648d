// RunReplay: one complete replay run — pool (embedded or remote), deployment, driver,
// event loop — returning its summary. `kvpool replay` calls it once per (mode, sessions).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "client/pool_parts.h"
#include "common/status.h"
#include "engine/cost_model.h"
#include "engine/model_geometry.h"
#include "engine/topology.h"
#include "transfer/transfer_engine.h"
#include "proto/rpc_credentials.h"
#include "replay/replay_driver.h"
#include "replay/replay_metrics.h"
#include "trace/trace.h"

namespace kvpool::replay {

struct ReplayProgress {
  double emulated_s = 0;
  double window_start_s = 0;  // 0 until every lane warmed up
  bool warm = false;
  int64_t requests = 0;  // counted, finished
  size_t in_flight = 0;
  size_t lanes_warm = 0;
  int metrics_port = 0;  // the run's /metrics (metrics_listen); 0 without one
};

struct ReplayRunOptions {
  engine::ModelGeometry geometry;
  engine::Topology topology = engine::Topology::Uniform(1);
  // With a pool and several servers: "shared" (one pool of `topology.rails` parts over every
  // server's memory; every prefill instance uses it) or "split" (each server its own pool of
  // `topology.rails` parts, used only by its own prefill instances; embedded pools only).
  std::string pool_scope = "shared";
  engine::CostModelParams cost = engine::CostModelParams::Published();
  double admission_timeout_s = 900;  // how long a request may wait at the KV admission gate
  double prefetch_share = 0;          // engine::DeploymentOptions::prefetch_share (0: no prefetch)
  bool oracle_gate = false;           // engine::DeploymentOptions::oracle_gate
  ReplayOptions replay;
  // true: submit every request at its recorded time (OpenLoopDriver: Mooncake traces);
  // false: closed-loop session lanes (ReplayDriver: AgentX traces).
  bool open_loop = false;
  double speedup = 0;    // 0: as fast as the real work allows
  bool use_pool = true;  // false: GPU prefix cache only
  std::optional<client::PoolParts> pool;  // nullopt = embedded pool(s) sized by geometry and topology
  // Embedded pools only: an SSD tier of this many tokens under the DRAM pool (issue 17; 0:
  // none), scaled per server like the geometry's pool_tokens, its files in ssd_dir ("": the
  // pools' temporary folders).
  uint64_t ssd_tokens = 0;
  std::string ssd_dir;
  // Embedded pools only: the masters' bound on retention hints (master::PoolOptions).
  double max_retained_fraction = 0.5;
  // A split pool on existing pools: one per server, in server order (empty: embedded ones).
  std::vector<client::PoolParts> server_pools;
  // What the replay brings to existing pools (--auth-file, --tls-ca); embedded pools need none.
  proto::RpcCredentials credentials;
  // The read lease the restores' lookups ask for, in the pool's time (0: the master's default,
  // 5 s). The embedded pool runs on the simulation's clock, so its leases end in emulated time.
  std::chrono::milliseconds read_lease{0};
  // --transport ucx: the pool's client reaches stores on other hosts over UCX (with a pool, not
  // embedded), and the network handoff writes over it.
  transfer::UcxSettings ucx;
  // 0: every paged cache in host memory. N > 0: on CUDA devices 0..N-1 (DevicePlacement), with
  // the packers, pattern writes and checks as kernels. UNAVAILABLE without CUDA or devices.
  int gpus = 0;
  // "network": the real handoff path (src/handoff: gather, writes into a bounded landing
  // segment through the transfer engine, checksummed scatter); "cpu": a memcpy per token-layer;
  // "gpu": gather kernel, peer copies, scatter kernel (src/handoff's HandoffPipeline; needs
  // gpus > 0, which only it supports). "": gpu with gpus > 0, network otherwise.
  std::string handoff;
  std::function<void(const ReplayProgress&)> on_progress;  // about twice a second, and once at the end
  // HTTP address of the run's /metrics and /health ("" for none) while the run goes on: the
  // prefill instances' connector counters and latency histograms (summed), the handoffs' times
  // and sizes, and the transfer requests' sizes.
  std::string metrics_listen;
  // A file that gets the same Prometheus text when the run ends ("" for none), written whole
  // (a temporary file renamed over it): for node_exporter's textfile collector, or a batch
  // job's record. An unwritable path is an error before the run starts.
  std::string metrics_file;
};

Result<ReplaySummary> RunReplay(const trace::Corpus& corpus, const ReplayRunOptions& options);

}  // namespace kvpool::replay
