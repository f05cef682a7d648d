#include "replay/replay_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvpool::replay {

Percentiles ComputePercentiles(std::vector<double> values) {
  Percentiles p;
  p.count = static_cast<int64_t>(values.size());
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) { return values[std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5))]; };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.max = values.back();
  return p;
}

ReplaySummary Summarize(std::span<const engine::RequestRecord> records, double window_start_s, double window_end_s, int gpus) {
  ReplaySummary s;
  s.gpus = gpus;
  s.window_start_s = window_start_s;
  s.window_s = std::max(0.0, window_end_s - window_start_s);
  std::vector<double> ttft, gate, prefill, gen, stage, wait, critical, restore_real, handoff, handoff_real;
  for (const engine::RequestRecord& r : records) {
    if (!r.counted) {
      ++s.uncounted_requests;
      continue;
    }
    if (r.failed) {
      ++s.failed_requests;
      if (s.first_failure.empty()) s.first_failure = r.failure;
      continue;
    }
    if (r.finish_s < window_start_s || r.finish_s > window_end_s) continue;
    ++s.requests;
    s.prompt_tokens += r.input_tokens;
    s.generated_tokens += r.output_tokens;
    s.gpu_cache_tokens += r.gpu_cached_tokens;
    s.pool_tokens += r.pool_tokens;
    s.pool_ssd_tokens += r.pool_ssd_tokens;
    s.computed_tokens += r.computed_tokens;
    s.ceiling_tokens += r.ceiling_hit_tokens;
    ttft.push_back(r.ttft_s());
    gate.push_back(r.admitted_s - r.arrival_s);
    prefill.push_back(r.first_token_s - r.admitted_s);
    if (r.output_tokens > 1 && r.finish_s > r.first_token_s) {
      gen.push_back(double(r.output_tokens - 1) / (r.finish_s - r.first_token_s));
    }
    if (!r.stage_restore_s.empty()) {
      ++s.restores;
      stage.insert(stage.end(), r.stage_restore_s.begin(), r.stage_restore_s.end());
      wait.push_back(r.restore_stage_spread_s());
      critical.push_back(r.restore_wait_s);
      s.prefetched_restores += r.prefetched ? 1 : 0;
      restore_real.push_back(r.restore_real_s);
    }
    handoff.push_back(r.handoff_s);
    handoff_real.push_back(r.handoff_real_s);
    s.restore_bytes += r.restore_bytes;
    s.save_bytes += r.save_bytes;
    s.handoff_bytes += r.handoff_bytes;
    s.restore_fallback_tokens += r.restore_fallback_tokens;
  }
  // Verification covers every request that moved KV, counted or not, in the window or not.
  for (const engine::RequestRecord& r : records) s.verification_errors += r.verification_errors;
  if (s.window_s > 0) {
    s.throughput_tok_s = double(s.prompt_tokens + s.generated_tokens) / s.window_s;
    s.throughput_tok_s_per_gpu = gpus > 0 ? s.throughput_tok_s / gpus : 0;
  }
  s.ttft_s = ComputePercentiles(std::move(ttft));
  s.gate_wait_s = ComputePercentiles(std::move(gate));
  s.prefill_s = ComputePercentiles(std::move(prefill));
  s.user_gen_tok_s = ComputePercentiles(std::move(gen));
  s.stage_restore_s = ComputePercentiles(std::move(stage));
  s.restore_stage_wait_s = ComputePercentiles(std::move(wait));
  for (double c : critical) s.restore_critical_total_s += c;
  s.restore_critical_s = ComputePercentiles(std::move(critical));
  s.restore_real_s = ComputePercentiles(std::move(restore_real));
  s.handoff_s = ComputePercentiles(std::move(handoff));
  s.handoff_real_s = ComputePercentiles(std::move(handoff_real));
  return s;
}

namespace {

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}, {"count", p.count}};
}

// Why lookups stopped short (connector::MissReason), whole run: the prefill instances'
// connector counters of the stop reasons (a lookup that found every chunk counts in none).
nlohmann::json MissReasons(const std::map<std::string, uint64_t>& connector) {
  const auto count = [&](const char* name) {
    const auto it = connector.find(std::string("kvpool_connector_") + name);
    return it == connector.end() ? uint64_t{0} : it->second;
  };
  return {{"lookups", count("lookups")},
          {"never_stored", count("lookup_miss_never_stored")},
          {"evicted", count("lookup_miss_evicted")},
          {"pending", count("lookup_miss_pending")},
          {"key_mismatch", count("lookup_miss_key_mismatch")},
          {"partial_stages", count("lookup_partial_chunks")},
          {"unreachable_stages", count("lookup_unreachable_stages")}};
}

}  // namespace

PoolCounters& PoolCounters::operator+=(const PoolCounters& other) {
  capacity_bytes += other.capacity_bytes;
  ssd_capacity_bytes += other.ssd_capacity_bytes;
  used_bytes += other.used_bytes;
  ssd_used_bytes += other.ssd_used_bytes;
  evicted_objects += other.evicted_objects;
  demotions += other.demotions;
  demotion_failures += other.demotion_failures;
  promotions += other.promotions;
  promotion_failures += other.promotion_failures;
  ssd_hits += other.ssd_hits;
  ssd_evictions += other.ssd_evictions;
  return *this;
}

nlohmann::json SummaryToJson(const ReplaySummary& s) {
  nlohmann::json j;
  j["mode"] = s.mode;
  j["pool_scope"] = s.pool_scope;
  j["geometry"] = s.geometry;
  j["topology"] = s.topology;
  j["servers"] = s.servers;
  j["sessions"] = s.sessions;
  j["arrival_rate"] = s.arrival_rate;
  j["prefill"] = s.prefill;
  j["gpus"] = s.gpus;
  j["kv_memory"] = s.kv_memory;
  j["handoff"] = s.handoff;
  j["speedup"] = s.speedup;
  j["max_tokens"] = s.max_tokens;
  j["gate_reserves"] = s.gate_reserves;
  j["window_start_s"] = s.window_start_s;
  j["window_s"] = s.window_s;
  j["requests"] = s.requests;
  j["uncounted_requests"] = s.uncounted_requests;
  j["failed_requests"] = s.failed_requests;
  j["first_failure"] = s.first_failure;
  j["traces_skipped"] = s.traces_skipped;
  j["prompt_tokens"] = s.prompt_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["throughput_tok_s"] = s.throughput_tok_s;
  j["throughput_tok_s_per_gpu"] = s.throughput_tok_s_per_gpu;
  j["ttft_s"] = PercentilesJson(s.ttft_s);
  j["gate_wait_s"] = PercentilesJson(s.gate_wait_s);
  j["prefill_s"] = PercentilesJson(s.prefill_s);
  j["user_gen_tok_s"] = PercentilesJson(s.user_gen_tok_s);
  j["token_sources"] = {{"gpu_cache", s.gpu_cache_tokens},
                        {"pool", s.pool_tokens},
                        {"pool_from_ssd", s.pool_ssd_tokens},
                        {"computed", s.computed_tokens},
                        {"gpu_cache_share", s.gpu_share()},
                        {"pool_share", s.pool_share()},
                        {"computed_share", s.computed_share()},
                        {"reuse", s.reuse()},
                        {"ceiling", s.ceiling()},
                        {"reuse_of_ceiling", s.ceiling() > 0 ? s.reuse() / s.ceiling() : 0.0}};
  j["restores"] = s.restores;
  j["stage_restore_s"] = PercentilesJson(s.stage_restore_s);
  j["restore_stage_wait_s"] = PercentilesJson(s.restore_stage_wait_s);
  j["restore_critical_s"] = PercentilesJson(s.restore_critical_s);
  j["restore_critical_total_s"] = s.restore_critical_total_s;
  j["prefetched_restores"] = s.prefetched_restores;
  j["handoff_s"] = PercentilesJson(s.handoff_s);
  // What measures the machine that ran the replay rather than the replay: the only figures
  // in which two runs of one seed may differ (real seconds of the whole run, of restores and of
  // handoffs, and the longest stall behind the --speedup pace).
  j["machine_timings"] = {{"wall_s", s.wall_s},
                          {"max_lag_s", s.max_lag_s},
                          {"restore_real_s", PercentilesJson(s.restore_real_s)},
                          {"handoff_real_s", PercentilesJson(s.handoff_real_s)}};
  j["bytes"] = {{"restored", s.restore_bytes}, {"saved", s.save_bytes}, {"handed_off", s.handoff_bytes}};
  j["restore_fallback_tokens"] = s.restore_fallback_tokens;
  j["verification_errors"] = s.verification_errors;
  j["deployment"] = {{"prefix_cache_evictions", s.deployment.prefix_cache_evictions},
                     {"restore_errors", s.deployment.restore_errors},
                     {"save_failures", s.deployment.save_failures},
                     {"peak_decode_kv_utilisation", s.deployment.peak_decode_kv_utilisation},
                     {"mean_decode_kv_utilisation", s.deployment.mean_decode_kv_utilisation},
                     {"connector", s.deployment.connector},
                     {"router_moves", s.deployment.router_moves},
                     {"retention_keys", s.deployment.retention_keys},
                     {"retention_refused", s.deployment.retention_refused},
                     {"superseded_chunks", s.deployment.superseded_chunks},
                     {"superseded_bytes", s.deployment.superseded_bytes},
                     {"prefetches", s.deployment.prefetches},
                     {"prefetches_dropped", s.deployment.prefetches_dropped},
                     {"rails_emulated", {{"transfers", s.deployment.rails.transfers},
                                         {"bytes", s.deployment.rails.bytes},
                                         {"queued_s", s.deployment.rails.queued_s}}}};
  j["miss_reasons"] = MissReasons(s.deployment.connector);
  if (s.pool_counters) {
    const PoolCounters& c = *s.pool_counters;
    j["pool_counters"] = {{"capacity_bytes", c.capacity_bytes},     {"ssd_capacity_bytes", c.ssd_capacity_bytes},
                          {"used_bytes", c.used_bytes},             {"ssd_used_bytes", c.ssd_used_bytes},
                          {"evicted_objects", c.evicted_objects},   {"demotions", c.demotions},
                          {"demotion_failures", c.demotion_failures}, {"promotions", c.promotions},
                          {"promotion_failures", c.promotion_failures}, {"ssd_hits", c.ssd_hits},
                          {"ssd_evictions", c.ssd_evictions}};
  }
  if (s.return_predictions) {
    const ReturnPredictionScore& r = *s.return_predictions;
    j["return_predictions"] = {{"scored", r.scored}, {"returned_within_hold", r.returned_within_hold},
                               {"median_abs_log_ratio", r.median_abs_log_ratio}, {"median_ratio", r.median_ratio},
                               {"by_basis", r.by_basis}};
  }
  return j;
}


std::string FormatSummary(const ReplaySummary& s) {
  std::string out;
  out += fmt::format("replay {}{} · {} · geometry {} · {} ({} GPUs) · {:.0f} s emulated ({:.1f} s wall)\n", s.mode,
                     s.pool_scope.empty() ? "" : " (" + s.pool_scope + ")",
                     s.sessions == 0        ? std::string("open loop")
                     : s.arrival_rate > 0   ? fmt::format("{} sessions at {:g} req/s", s.sessions, s.arrival_rate)
                                            : fmt::format("{} sessions", s.sessions),
                     s.geometry,
                     s.topology, s.gpus, s.window_s, s.wall_s);
  out += fmt::format("  throughput      {:.0f} tok/s per GPU ({:.0f} tok/s; {} requests, {} uncounted)\n",
                     s.throughput_tok_s_per_gpu, s.throughput_tok_s, s.requests, s.uncounted_requests);
  out += fmt::format("  TTFT            p50 {:.2f} s · p90 {:.2f} s · max {:.2f} s (KV gate wait p50 {:.2f} s p90 "
                     "{:.2f} s; prefill p50 {:.2f} s p90 {:.2f} s)\n",
                     s.ttft_s.p50, s.ttft_s.p90, s.ttft_s.max, s.gate_wait_s.p50, s.gate_wait_s.p90,
                     s.prefill_s.p50, s.prefill_s.p90);
  out += fmt::format("  KV gate         reserves prompt + {} ({})\n", s.gate_reserves,
                     s.max_tokens > 0 ? fmt::format("max_tokens {}", s.max_tokens) : "the client asks for the recorded output");
  out += fmt::format("  per-user speed  p50 {:.1f} tok/s · p90 {:.1f} tok/s\n", s.user_gen_tok_s.p50,
                     s.user_gen_tok_s.p90);
  out += fmt::format("  prompt tokens   GPU cache {:.1f}% · pool {:.1f}% · computed {:.1f}% · reuse {:.1f}% of "
                     "ceiling {:.1f}%\n",
                     100 * s.gpu_share(), 100 * s.pool_share(), 100 * s.computed_share(), 100 * s.reuse(),
                     100 * s.ceiling());
  out += fmt::format("  restore         {} restores · per stage p50 {:.0f} ms p90 {:.0f} ms · first-to-last stage "
                     "p50 {:.0f} ms · real p50 {:.1f} ms\n",
                     s.restores, 1e3 * s.stage_restore_s.p50, 1e3 * s.stage_restore_s.p90,
                     1e3 * s.restore_stage_wait_s.p50, 1e3 * s.restore_real_s.p50);
  out += fmt::format("  restore waited  p50 {:.0f} ms · p90 {:.0f} ms · {:.1f} s in all, from start in prefill to "
                     "restored ({} of the restores prefetched)\n",
                     1e3 * s.restore_critical_s.p50, 1e3 * s.restore_critical_s.p90, s.restore_critical_total_s,
                     s.prefetched_restores);
  out += fmt::format("  handoff         p50 {:.0f} ms · real p50 {:.1f} ms ({} handoff, KV in {} memory)\n",
                     1e3 * s.handoff_s.p50, 1e3 * s.handoff_real_s.p50, s.handoff, s.kv_memory);
  out += fmt::format("  bytes moved     restored {:.1f} MB · saved {:.1f} MB · handed off {:.1f} MB\n",
                     s.restore_bytes / 1e6, s.save_bytes / 1e6, s.handoff_bytes / 1e6);
  out += fmt::format("  deployment      decode KV mean {:.0f}% (peak {:.0f}%) · GPU cache evictions {} blocks · restore "
                     "errors {} · save failures {}\n",
                     100 * s.deployment.mean_decode_kv_utilisation, 100 * s.deployment.peak_decode_kv_utilisation,
                     s.deployment.prefix_cache_evictions,
                     s.deployment.restore_errors, s.deployment.save_failures);
  if (const nlohmann::json m = MissReasons(s.deployment.connector); m["lookups"] > 0) {
    const double lookups = m["lookups"].get<double>();
    const auto pct = [&](const char* reason) { return 100.0 * m[reason].get<double>() / lookups; };
    out += fmt::format("  lookups         {} (whole run) · stopped short at a chunk never stored {:.0f}% · evicted "
                       "{:.0f}% · being saved {:.0f}% · held by some stages only {:.0f}% · under another namespace "
                       "{:.0f}%\n",
                       m["lookups"].get<uint64_t>(), pct("never_stored"), pct("evicted"), pct("pending"),
                       pct("partial_stages"), pct("key_mismatch"));
  }
  if (s.servers > 1) {
    out += fmt::format("  between servers {:.1f} GB over the rails (published bytes, emulated) in {} transfers · "
                       "{:.1f} s queued in all · {} router moves\n",
                       s.deployment.rails.bytes / 1e9, s.deployment.rails.transfers, s.deployment.rails.queued_s,
                       s.deployment.router_moves);
  }
  if (s.pool_counters) {  // the embedded pool's own counters
    const PoolCounters& c = *s.pool_counters;
    out += fmt::format("  pool            DRAM {:.2f} of {:.2f} GB used at the end · {} objects evicted for good "
                       "(whole run)\n",
                       c.used_bytes / 1e9, c.capacity_bytes / 1e9, c.evicted_objects);
    if (c.ssd_capacity_bytes > 0) {
      out += fmt::format("  SSD tier        {:.2f} of {:.2f} GB used · {} demoted ({} failed) · {} promoted ({} failed) · "
                         "{} dropped by the tier\n",
                         c.ssd_used_bytes / 1e9, c.ssd_capacity_bytes / 1e9, c.demotions, c.demotion_failures,
                         c.promotions, c.promotion_failures, c.ssd_evictions);
    }
  }
  if (s.return_predictions && s.return_predictions->scored > 0) {
    const ReturnPredictionScore& r = *s.return_predictions;
    out += fmt::format("  returns         {} predicted waits: median predicted/actual {:.2f} (median |ln| {:.2f}) · "
                       "{:.0f}% back within the hint's hold\n",
                       r.scored, r.median_ratio, r.median_abs_log_ratio, 100.0 * r.returned_within_hold / r.scored);
  }
  out += fmt::format("  errors          verification {} · failed requests {}{} · restore fallbacks {} tokens\n",
                     s.verification_errors, s.failed_requests,
                     s.first_failure.empty() ? "" : " (" + s.first_failure + ")", s.restore_fallback_tokens);
  return out;
}

}  // namespace kvpool::replay
