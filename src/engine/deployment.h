// Deployment: the emulated P/D serving system a replay drives — a router, per decode
// instance a KV admission gate, prefill instances and decode instances, with emulated
// compute and real KV movement (see prefill_instance.h, decode_instance.h, kv_handoff.h).
//
//   Submit -> gate (reserve prompt + output tokens on the least-committed decode instance;
//             wait FIFO, fail only after admission_timeout_s)
//          -> router (the session's prefill instance; new sessions by power of two choices)
//          -> prefill (GPU prefix cache, pool restore, chunked compute, pool save)
//          -> handoff (KvHandoff copies every stage's KV into decode's cache; verified)
//          -> decode (continuous batching until the pinned output length) -> on_done(record)
//
// Everything runs on the Simulation's thread; Submit must be called from it (or before Run).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "connector/chunk_store.h"
#include "connector/kv_namespace.h"
#include "engine/cost_model.h"
#include "engine/decode_instance.h"
#include "engine/kv_handoff.h"
#include "engine/model_geometry.h"
#include "engine/prefill_instance.h"
#include "engine/session_router.h"
#include "engine/simulation.h"

namespace kvpool::engine {

struct DeploymentOptions {
  ModelGeometry geometry;
  CostModelParams cost = CostModelParams::Published();
  // The pool (null: no pool, GPU prefix cache only). REQUIRES: outlives the deployment.
  connector::ChunkStore* pool = nullptr;
  // Salts the KV namespace so runs sharing one pool never see each other's chunks.
  std::string run_salt;
  double admission_timeout_s = 900;
  uint64_t seed = 1;
  // Null: the CPU reference. REQUIRES: outlives the deployment; a GPU handoff when `devices`
  // puts the caches on GPUs.
  KvHandoff* handoff = nullptr;
  DevicePlacement devices;  // default: every cache in host memory
};

struct DeploymentRequest {
  uint64_t session_id = 0;
  std::vector<connector::TokenId> tokens;  // the prompt; REQUIRES: not empty
  uint64_t output_tokens = 1;
  bool counted = true;
};

// Totals over the deployment's lifetime.
struct DeploymentCounters {
  uint64_t prefix_cache_evictions = 0;
  uint64_t restore_errors = 0;  // lookups/restores that failed (the request computed instead)
  uint64_t save_failures = 0;
  double peak_decode_kv_utilisation = 0;
  double mean_decode_kv_utilisation = 0;  // over the window given to counters()
  std::map<std::string, uint64_t> connector;  // summed ConnectorMetrics snapshots
};

class Deployment {
 public:
  static Result<std::unique_ptr<Deployment>> Create(DeploymentOptions options, Simulation* sim);
  ~Deployment();
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  // Starts serving `request`; `on_done` gets its record when it finished or failed.
  void Submit(DeploymentRequest request, std::function<void(const RequestRecord&)> on_done);

  size_t in_flight() const { return in_flight_.size(); }
  // Totals; the mean decode KV use is over [from, to] (emulated seconds).
  DeploymentCounters counters(double from = 0, double to = 0) const;
  const ModelGeometry& geometry() const { return options_.geometry; }
  const connector::KvNamespace& kv_namespace() const { return *ns_; }
  bool uses_pool() const { return options_.pool != nullptr; }

 private:
  Deployment(DeploymentOptions options, Simulation* sim);
  void StartPrefill(InFlightRequest* r);
  void HandOff(InFlightRequest* r);
  void Finish(InFlightRequest* r);
  void Fail(InFlightRequest* r, std::string why);
  void AdmitWaiting(DecodeInstance& d, const std::vector<uint64_t>& admitted);

  DeploymentOptions options_;
  Simulation* const sim_;
  std::optional<connector::KvNamespace> ns_;
  std::unique_ptr<CostModel> cost_;
  DeploymentContext ctx_;
  std::unique_ptr<KvHandoff> own_handoff_;
  KvHandoff* handoff_ = nullptr;
  SessionRouter router_;
  std::vector<std::unique_ptr<PrefillInstance>> prefill_;
  std::vector<std::unique_ptr<DecodeInstance>> decode_;
  uint64_t next_request_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<InFlightRequest>> in_flight_;
};

}  // namespace kvpool::engine
