// Deployment: the emulated P/D serving system a replay drives — on the servers of its
// topology (topology.h), groups of prefill and decode instances with a router each, per
// decode instance a KV admission gate, with emulated compute and real KV movement (see
// prefill_instance.h, decode_instance.h, kv_handoff.h); traffic between servers pays the
// rails (rail_network.h).
//
//   Submit -> group (a session's first request picks the group with the most uncommitted
//             decode KV room; the session stays there)
//          -> gate (reserve prompt + output tokens on the group's least-committed decode
//             instance; wait FIFO, fail only after admission_timeout_s)
//          -> router (the group's: the session's prefill instance, new sessions by power of
//             two choices; or, where the topology says so, every request by power of two)
//          -> prefill (GPU prefix cache, pool restore, chunked compute, pool save)
//          -> handoff (KvHandoff copies every stage's KV into decode's cache; verified)
//          -> decode (continuous batching until the pinned output length) -> on_done(record)
//
// Everything runs on the Simulation's thread; Submit must be called from it (or before Run).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
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
#include "engine/request_sink.h"
#include "engine/session_router.h"
#include "engine/simulation.h"
#include "engine/topology.h"

namespace kvpool::engine {

struct DeploymentOptions {
  ModelGeometry geometry;
  CostModelParams cost = CostModelParams::Published();
  Topology topology = Topology::Uniform(1);
  // The pool. Empty: none (GPU prefix cache only). One store: every prefill instance uses it
  // (with several servers, one shared pool whose memory every server contributes). One per
  // server: each prefill instance uses its own server's (split pools). REQUIRES: outlive the
  // deployment.
  std::vector<connector::ChunkStore*> pools;
  // Salts the KV namespace so runs sharing one pool never see each other's chunks.
  std::string run_salt;
  double admission_timeout_s = 900;
  uint64_t seed = 1;
  // Null: the CPU reference. REQUIRES: outlives the deployment; a GPU handoff when `devices`
  // puts the caches on GPUs.
  KvHandoff* handoff = nullptr;
  DevicePlacement devices;  // default: every cache in host memory
  // false: restores do not check checksums (connector::RestoreOptions::verify_checksums), so
  // a test can show the replay's own verification catching corrupt KV.
  bool verify_checksums = true;
  // Restore prefetch (issue 18): a request is routed when it arrives and its pool prefix
  // restored at once, overlapping its wait at the admission gate and the prefill queue. The
  // share of each prefill instance's GPU cache that prefetched requests may hold before they
  // start; 0: off (the restore starts when prefill starts the request).
  double prefetch_share = 0;
  // true (oracle): the KV admission gate reserves each request's output_tokens, which only the
  // trace knows, instead of its max_tokens. The two are equal when the client asks for the
  // recorded length (max_tokens 0).
  bool oracle_gate = false;
};


// Totals over the deployment's lifetime.
struct DeploymentCounters {
  uint64_t prefix_cache_evictions = 0;
  uint64_t restore_errors = 0;  // lookups/restores that failed (the request computed instead)
  uint64_t save_failures = 0;
  double peak_decode_kv_utilisation = 0;
  double mean_decode_kv_utilisation = 0;  // over the window given to counters()
  std::map<std::string, uint64_t> connector;  // summed ConnectorMetrics snapshots
  RailCounters rails;          // traffic between servers (emulated)
  uint64_t router_moves = 0;   // requests a router sent off their session's instance
  // Router hints to the pool (RetainSession / ReleaseSession): keys named, and those a pool
  // refused because its retained share was full.
  uint64_t retention_keys = 0, retention_refused = 0;
  // Chunks of earlier prompts that a thread's next prompt no longer continued (SupersedeSession),
  // released to be evicted first, and their bytes over every stage.
  uint64_t superseded_chunks = 0, superseded_bytes = 0;
  // Restore prefetch: requests whose restore started before they did, and those whose
  // prefetch was given back (failed at the gate, or its blocks needed by a request starting).
  uint64_t prefetches = 0, prefetches_dropped = 0;
};

class Deployment final : public RequestSink {
 public:
  static Result<std::unique_ptr<Deployment>> Create(DeploymentOptions options, Simulation* sim);
  ~Deployment() override;
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  void Submit(DeploymentRequest request, std::function<void(const RequestRecord&)> on_done) override;

  size_t in_flight() const { return in_flight_.size(); }
  // Returns once no work of the deployment goes on outside the simulation's events (a restore
  // that timed out is handed out while its late reads go on): call it before reading the final
  // metrics of a run.
  void WaitIdle();
  // Totals; the mean decode KV use is over [from, to] (emulated seconds).
  DeploymentCounters counters(double from = 0, double to = 0) const;
  // Every prefill instance's connector metrics (atomics: readable from any thread while the
  // deployment runs; the list is fixed at Create).
  std::vector<const connector::ConnectorMetrics*> connector_metrics() const;
  // Every handoff's time and bytes (atomics, like the connector metrics).
  const KvHandoffMetrics& handoff_metrics() const { return handoff_metrics_; }
  const ModelGeometry& geometry() const override { return options_.geometry; }
  const connector::KvNamespace& kv_namespace() const { return *ns_; }
  bool uses_pool() const override { return !options_.pools.empty(); }

  // Retention hints (RequestSink) go to every pool; one round trip per pool part.
  void RetainSession(std::span<const connector::TokenId> tokens, std::chrono::milliseconds ttl,
                     std::chrono::milliseconds reuse_in) override;
  void ReleaseSession(std::span<const connector::TokenId> tokens) override;
  void SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) override;

 private:
  Deployment(DeploymentOptions options, Simulation* sim);
  void StartPrefill(InFlightRequest* r);
  // The prefill instance of r's group its router picks now.
  int RoutePrefill(const InFlightRequest& r);
  // Every stage object of the whole chunks of a session's prompt (what retention hints name).
  std::vector<std::string> SessionKeys(std::span<const connector::TokenId> tokens) const;
  void HandOff(InFlightRequest* r);
  void Finish(InFlightRequest* r);
  void Fail(InFlightRequest* r, std::string why);
  void AdmitWaiting(DecodeInstance& d, const std::vector<uint64_t>& admitted);
  // The group a session's requests go to: its first request's pick, by decode KV room.
  int GroupOf(uint64_t session_id);
  uint64_t Committed(int decode) const;  // KV tokens reserved and waiting at its gate
  // When the last byte of r's handoff from its prefill instance to its decode instance
  // arrives over the rails (now, when both are on one server).
  double HandoffRailEnd(const InFlightRequest& r);

  DeploymentOptions options_;
  Simulation* const sim_;
  std::optional<connector::KvNamespace> ns_;
  uint64_t retention_keys_ = 0, retention_refused_ = 0;
  uint64_t superseded_chunks_ = 0;
  std::unique_ptr<CostModel> cost_;
  DeploymentContext ctx_;
  std::unique_ptr<KvHandoff> own_handoff_;
  KvHandoff* handoff_ = nullptr;
  std::unique_ptr<RailNetwork> rails_;
  std::vector<SessionRouter> routers_;                // one per group
  std::vector<std::vector<int>> group_prefill_;       // instance indices of each group
  std::vector<std::vector<int>> group_decode_;
  std::unordered_map<uint64_t, int> session_group_;
  std::vector<std::unique_ptr<PrefillInstance>> prefill_;
  std::vector<std::unique_ptr<DecodeInstance>> decode_;
  uint64_t next_request_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<InFlightRequest>> in_flight_;
  KvHandoffMetrics handoff_metrics_;
};

}  // namespace kvpool::engine
