#include "replay/replay_driver.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/kv_pattern.h"
#include "replay/token_content.h"

namespace kvpool::replay {

struct ReplayDriver::Lane {
  int index = 0;
  bool warm = false;
  std::unique_ptr<Tree> tree;
  std::vector<std::unique_ptr<Tree>> finished;  // kept until the run ends: callbacks hold pointers
};

struct ReplayDriver::Tree {
  Lane* lane = nullptr;
  const trace::Trace* trace = nullptr;
  uint64_t session_id = 0;
  uint64_t salt = 0;
  size_t next_turn = 0;        // the main turn to send next
  size_t last_uncounted_turn = 0;  // warm-up ends when this turn finished (if warming)
  bool warming = false;
  bool main_timer_done = false;
  bool main_done = false;
  bool due = false;  // paced arrivals: in due_, waiting for an arrival
  int active_subagents = 0;
  std::unordered_map<size_t, int> gate_pending;        // parent turn -> subagents it waits for
  std::unordered_map<size_t, std::vector<size_t>> spawned_after;  // parent turn -> subagents
  trace::PrefixHitWalk ceiling_walk;
  std::vector<connector::TokenId> last_prompt;  // the latest main turn's (retention hints)
  std::optional<double> main_end_s;  // when its latest main turn ended (retention hints)
  std::string main_stop;             // and how
  uint64_t main_wait = 0;            // numbers the main thread's waits (renewals check it)
  // Retention hints: each running subagent's latest prompt, until it is done.
  std::unordered_map<size_t, std::vector<connector::TokenId>> subagent_prompts;
};

void SetRequestOutput(const ReplayOptions& options, int64_t recorded_output, engine::DeploymentRequest* r) {
  const int64_t cap = options.max_output_tokens;
  r->output_tokens = static_cast<uint64_t>(std::max<int64_t>(1, cap > 0 ? std::min(recorded_output, cap) : recorded_output));
  r->max_tokens = cap > 0 ? static_cast<uint64_t>(cap) : 0;
}

ReplayDriver::ReplayDriver(const trace::Corpus& corpus, ReplayOptions options, engine::RequestSink* sink, engine::Simulation* sim)
    : corpus_(corpus), options_(options), sink_(sink), sim_(sim),
      rng_state_(engine::Mix64(options.seed)),
      arrival_rng_(engine::Mix64(options.seed ^ 0x9e3779b97f4a7c15ULL)),
      predictor_(options.idle_cap_s) {}

ReplayDriver::~ReplayDriver() = default;

Status ReplayDriver::Start() {
  if (options_.sessions < 1) return InvalidArgument("replay: --sessions must be at least 1");
  const engine::ModelGeometry& g = sink_->geometry();
  // A trace must fit the context, a prefill instance's cache and a decode instance's KV.
  const int64_t fits = std::min<int64_t>({g.max_context_tokens, static_cast<int64_t>(g.prefill_cache_tokens),
                                          static_cast<int64_t>(g.decode_kv_tokens)});
  for (const trace::Trace& t : corpus_.traces) {
    if (t.requests.empty() || t.PeakContextTokens() > fits) {
      ++traces_skipped_;
      continue;
    }
    usable_.push_back(&t);
  }
  if (usable_.empty()) {
    return InvalidArgument(fmt::format("replay: none of {} traces fits a {}-token context", corpus_.traces.size(), fits));
  }
  next_trace_ = engine::Mix64(options_.seed) % usable_.size();
  for (int i = 0; i < options_.sessions; ++i) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->index = i;
  }
  if (options_.max_requests == 0 && options_.duration_s <= 0) {
    return InvalidArgument("replay: give a duration or a request limit");
  }
  if (options_.arrival_rate < 0) return InvalidArgument("replay: the arrival rate must be positive");
  if (options_.arrival_rate > 0) ScheduleArrival();
  for (auto& lane : lanes_) {
    const double start = options_.ramp_s * lane->index / options_.sessions;
    if (start > 0) {
      sim_->After(start, [this, l = lane.get()] { StartTree(*l, true); });
    } else {
      StartTree(*lane, true);
    }
  }
  if (options_.duration_s > 0) {
    // A bound even if some lane never finishes its warm-up (a very long primer).
    sim_->At(sim_->now() + 2 * options_.duration_s + 3600, [this] { StopAt(sim_->now()); });
  }
  return Status::Ok();
}

double ReplayDriver::window_start_s() const {
  if (window_opened_at_) return *window_opened_at_;
  return first_counted_arrival_.value_or(0);
}

double ReplayDriver::CappedGap(double next_start, double previous_end) const {
  return std::clamp(next_start - previous_end, 0.0, options_.idle_cap_s);
}

namespace {
// The predictor's thread ids: a session's main thread, and each of its subagents.
uint64_t MainThread(uint64_t session_id) { return session_id << 16; }
uint64_t SubagentThread(uint64_t session_id, size_t subagent) { return (session_id << 16) | (subagent + 1); }
}  // namespace

void ReplayDriver::StartTree(Lane& lane, bool from_random_point) {
  if (stop_time_) return;
  if (lane.tree) lane.finished.push_back(std::move(lane.tree));
  auto tree = std::make_unique<Tree>();
  tree->lane = &lane;
  tree->trace = usable_[next_trace_++ % usable_.size()];
  tree->session_id = next_session_id_++;
  tree->salt = engine::Mix64(tree->session_id ^ (options_.seed << 32));
  for (size_t i = 0; i < tree->trace->subagents.size(); ++i) {
    tree->spawned_after[tree->trace->subagents[i].spawned_after_turn].push_back(i);
  }
  const size_t turns = tree->trace->requests.size();
  if (from_random_point) {
    const size_t lo = turns / 4, hi = std::max(lo, turns * 3 / 4);
    rng_state_ = engine::Mix64(rng_state_);
    const size_t start = std::max<size_t>(1, lo + rng_state_ % (hi - lo + 1));
    tree->next_turn = std::min(start, turns) - 1;  // the primer
    tree->warming = true;
    tree->last_uncounted_turn = std::min(turns - 1, tree->next_turn + options_.warmup_requests);
  }
  ++trees_started_;
  tree->main_timer_done = true;
  lane.tree = std::move(tree);
  TrySendMain(*lane.tree);
}

void ReplayDriver::SendMain(Tree& tree) {
  const size_t turn = tree.next_turn;
  const bool counted = !(tree.warming && turn <= tree.last_uncounted_turn);
  tree.main_timer_done = false;
  ++tree.main_wait;  // back: the wait is over
  if (options_.retention == ReplayOptions::Retention::kPredicted && tree.main_end_s) {
    predictor_.Observe(MainThread(tree.session_id), false, tree.main_stop, sim_->now() - *tree.main_end_s);
  }
  // The turn arrived: its history must last until prefill restores it, however long it queues,
  // and is needed before that of any session still waiting for its next turn.
  RetainPrompt(tree.last_prompt, 2 * options_.idle_cap_s, 0);
  Send(tree, tree.trace->requests[turn], counted,
       [this, t = &tree, turn](const engine::RequestRecord& record) { OnMainDone(*t, turn, record); },
       KeepsPrompts() ? &tree.last_prompt : nullptr);
}

void ReplayDriver::RetainPrompt(const std::vector<connector::TokenId>& prompt, double hold_s, double reuse_in_s) {
  if (options_.retention == ReplayOptions::Retention::kLru || !sink_->uses_pool() || prompt.empty()) return;
  // In emulated time, the embedded pool's (it runs on the simulation's clock).
  const auto ttl = std::chrono::milliseconds(static_cast<int64_t>(std::max(50.0, 1000 * hold_s)));
  const auto reuse_in = std::chrono::milliseconds(static_cast<int64_t>(1000 * reuse_in_s));
  sink_->RetainSession(prompt, ttl, reuse_in);
}

std::optional<ReturnPrediction> ReplayDriver::RetainWaiting(const std::vector<connector::TokenId>& prompt,
                                                            uint64_t thread, bool subagent,
                                                            const std::string& stop_reason, double recorded_gap_s) {
  switch (options_.retention) {
    case ReplayOptions::Retention::kLru:
      return std::nullopt;
    case ReplayOptions::Retention::kOracle:
      RetainPrompt(prompt, 2 * recorded_gap_s, recorded_gap_s);
      return std::nullopt;
    case ReplayOptions::Retention::kPredicted: {
      const ReturnPrediction p = predictor_.Predict(thread, subagent, stop_reason);
      RetainPrompt(prompt, p.hold_s, p.expected_s);
      return p;
    }
  }
  return std::nullopt;
}

void ReplayDriver::RenewWhenDue(Tree& tree, uint64_t wait, std::shared_ptr<const std::vector<connector::TokenId>> prompt,
                                double due_in_s, double hold_until_s) {
  // At least a second apart: a remaining wait's median can be tiny.
  sim_->AtBackground(sim_->now() + std::max(1.0, due_in_s), [this, t = &tree, wait, prompt = std::move(prompt),
                                                             hold_until_s] {
    if (t->main_wait != wait || stop_time_ || sim_->now() >= hold_until_s) return;  // back, or its hint lapsed
    const auto p = predictor_.PredictRemaining(MainThread(t->session_id), false, t->main_stop,
                                               sim_->now() - *t->main_end_s);
    if (!p) return;  // away longer than nearly every wait seen: taken for gone
    RetainPrompt(*prompt, hold_until_s - sim_->now(), p->expected_s);
    RenewWhenDue(*t, wait, prompt, p->expected_s, hold_until_s);
  });
}

void ReplayDriver::ReleasePrompt(std::vector<connector::TokenId>* prompt) {
  if (options_.retention == ReplayOptions::Retention::kOracle && sink_->uses_pool() && !prompt->empty()) {
    sink_->ReleaseSession(*prompt);  // it ended: first to evict
  }
  prompt->clear();
}

void ReplayDriver::OnMainDone(Tree& tree, size_t turn, const engine::RequestRecord& record) {
  const std::vector<trace::Request>& turns = tree.trace->requests;
  const bool counted = record.counted;
  if (tree.warming && turn == tree.last_uncounted_turn) {
    tree.warming = false;
    MarkLaneWarm(*tree.lane);
  }
  if (auto it = tree.spawned_after.find(turn); it != tree.spawned_after.end()) {
    for (size_t s : it->second) {
      const trace::Subagent& sub = tree.trace->subagents[s];
      if (sub.gates_turn) ++tree.gate_pending[*sub.gates_turn];
      StartSubagent(tree, s, counted);
    }
  }
  tree.main_end_s = sim_->now();
  tree.main_stop = turns[turn].stop_reason;
  ++tree.main_wait;
  const bool last = turn + 1 >= turns.size();
  const double gap = last ? 0 : CappedGap(turns[turn + 1].start_time_s, turns[turn].end_time_s());
  // With paced arrivals the next arrival decides when (below). A router cannot tell the last
  // turn from any other: only the oracle knows it ended, and hints nothing then.
  if (options_.arrival_rate <= 0 && (!last || options_.retention == ReplayOptions::Retention::kPredicted)) {
    const auto p = RetainWaiting(tree.last_prompt, MainThread(tree.session_id), false, tree.main_stop, gap);
    if (p && !tree.last_prompt.empty() && sink_->uses_pool()) {
      RenewWhenDue(tree, tree.main_wait, std::make_shared<const std::vector<connector::TokenId>>(tree.last_prompt),
                   p->expected_s, sim_->now() + p->hold_s);
    }
  }
  if (last) {
    tree.main_done = true;
    MaybeFinishTree(tree);
    return;
  }
  tree.next_turn = turn + 1;
  if (options_.arrival_rate > 0) {  // the next arrival decides when
    RetainPrompt(tree.last_prompt, 2 * options_.idle_cap_s, options_.idle_cap_s);
    tree.main_timer_done = true;
    TrySendMain(tree);
    return;
  }
  sim_->After(gap, [this, t = &tree] {
    t->main_timer_done = true;
    TrySendMain(*t);
  });
}

void ReplayDriver::TrySendMain(Tree& tree) {
  if (tree.main_done || !tree.main_timer_done || stop_time_) return;
  if (auto it = tree.gate_pending.find(tree.next_turn); it != tree.gate_pending.end() && it->second > 0) return;
  if (options_.arrival_rate <= 0) return SendMain(tree);
  if (tree.due) return;
  if (waiting_arrivals_ > 0) {
    --waiting_arrivals_;
    return SendMain(tree);
  }
  tree.due = true;
  due_.push_back(&tree);
}

void ReplayDriver::ScheduleArrival() {
  arrival_rng_ = engine::Mix64(arrival_rng_);
  const double uniform = (static_cast<double>(arrival_rng_ >> 11) + 0.5) / 9007199254740992.0;  // (0, 1)
  sim_->After(-std::log(uniform) / options_.arrival_rate, [this] { OnArrival(); });
}

void ReplayDriver::OnArrival() {
  if (stop_time_) return;
  ScheduleArrival();
  if (due_.empty()) {
    ++waiting_arrivals_;
    return;
  }
  arrival_rng_ = engine::Mix64(arrival_rng_);
  const size_t pick = arrival_rng_ % due_.size();
  Tree* tree = due_[pick];
  due_[pick] = due_.back();
  due_.pop_back();
  tree->due = false;
  SendMain(*tree);
}

void ReplayDriver::StartSubagent(Tree& tree, size_t subagent, bool counted) {
  const trace::Subagent& sub = tree.trace->subagents[subagent];
  if (sub.requests.empty()) {
    ++tree.active_subagents;
    OnSubagentDone(tree, subagent);
    return;
  }
  ++tree.active_subagents;
  const trace::Request& parent = tree.trace->requests[sub.spawned_after_turn];
  sim_->After(CappedGap(sub.requests[0].start_time_s, parent.end_time_s()),
              [this, t = &tree, subagent, counted] { SendSubagentRequest(*t, subagent, 0, counted); });
}

void ReplayDriver::SendSubagentRequest(Tree& tree, size_t subagent, size_t index, bool counted) {
  if (stop_time_) return;
  const trace::Subagent& sub = tree.trace->subagents[subagent];
  // A subagent's history is retained while it runs, like a main session's (retention hints).
  std::vector<connector::TokenId>* prompt = nullptr;
  if (KeepsPrompts()) {
    prompt = &tree.subagent_prompts[subagent];
    RetainPrompt(*prompt, 2 * options_.idle_cap_s, 0);
  }
  Send(tree, sub.requests[index], counted, [this, t = &tree, subagent, index, counted](const engine::RequestRecord&) {
    const trace::Subagent& s = t->trace->subagents[subagent];
    const uint64_t thread = SubagentThread(t->session_id, subagent);
    const bool last = index + 1 >= s.requests.size();
    const double gap = last ? 0 : CappedGap(s.requests[index + 1].start_time_s, s.requests[index].end_time_s());
    if (auto it = t->subagent_prompts.find(subagent);
        it != t->subagent_prompts.end() && (!last || options_.retention == ReplayOptions::Retention::kPredicted)) {
      RetainWaiting(it->second, thread, true, s.requests[index].stop_reason, gap);
    }
    if (last) return OnSubagentDone(*t, subagent);
    sim_->After(gap, [this, t, subagent, index, counted, thread, ended = sim_->now()] {
      if (options_.retention == ReplayOptions::Retention::kPredicted) {
        predictor_.Observe(thread, true, t->trace->subagents[subagent].requests[index].stop_reason, sim_->now() - ended);
      }
      SendSubagentRequest(*t, subagent, index + 1, counted);
    });
  }, prompt);
}

void ReplayDriver::OnSubagentDone(Tree& tree, size_t subagent) {
  --tree.active_subagents;
  if (auto it = tree.subagent_prompts.find(subagent); it != tree.subagent_prompts.end()) {
    ReleasePrompt(&it->second);
    tree.subagent_prompts.erase(it);
  }
  predictor_.Forget(SubagentThread(tree.session_id, subagent));
  const trace::Subagent& sub = tree.trace->subagents[subagent];
  if (sub.gates_turn) {
    --tree.gate_pending[*sub.gates_turn];
    TrySendMain(tree);
  }
  MaybeFinishTree(tree);
}

void ReplayDriver::MaybeFinishTree(Tree& tree) {
  if (!tree.main_done || tree.active_subagents > 0) return;
  tree.ceiling_walk = trace::PrefixHitWalk();  // the tree sends nothing more
  ReleasePrompt(&tree.last_prompt);
  predictor_.Forget(MainThread(tree.session_id));
  Lane& lane = *tree.lane;
  if (tree.warming) {  // a tree too short to finish its warm-up
    tree.warming = false;
    MarkLaneWarm(lane);
  }
  // Defer: the caller may still be inside this tree's callbacks.
  sim_->After(0, [this, l = &lane] { StartTree(*l, false); });
}

void ReplayDriver::Send(Tree& tree, const trace::Request& request, bool counted,
                        std::function<void(const engine::RequestRecord&)> then, std::vector<connector::TokenId>* prompt) {
  if (stop_time_) return;
  engine::DeploymentRequest r;
  r.session_id = tree.session_id;
  r.tokens = PromptTokens(request.hash_ids, tree.trace->block_size, request.input_tokens, tree.salt);
  if (prompt != nullptr) {
    if (options_.supersede && sink_->uses_pool() && !prompt->empty()) {
      const auto changed = std::mismatch(prompt->begin(), prompt->end(), r.tokens.begin(), r.tokens.end()).first;
      if (changed != prompt->end()) sink_->SupersedeSession(*prompt, changed - prompt->begin());
    }
    *prompt = r.tokens;
  }
  SetRequestOutput(options_, request.output_tokens, &r);
  r.counted = counted;
  const int64_t hits = tree.ceiling_walk.Visit(request.hash_ids);
  const uint64_t ceiling_tokens =
      static_cast<uint64_t>(std::min<int64_t>(hits * tree.trace->block_size, request.input_tokens));
  if (counted && !first_counted_arrival_) first_counted_arrival_ = sim_->now();
  sink_->Submit(std::move(r), [this, ceiling_tokens, then = std::move(then)](const engine::RequestRecord& done) {
    engine::RequestRecord copy = done;
    copy.ceiling_hit_tokens = ceiling_tokens;
    Record(copy);
    if (!stop_time_) then(copy);
  });
}

void ReplayDriver::Record(const engine::RequestRecord& record) {
  records_.push_back(record);
  if (!record.counted) return;
  ++counted_finished_;
  if (options_.max_requests > 0 && counted_finished_ >= options_.max_requests) StopAt(sim_->now());
}

void ReplayDriver::MarkLaneWarm(Lane& lane) {
  if (lane.warm) return;
  lane.warm = true;
  ++lanes_warm_;
  // The window opens when 90% of the lanes are warm: waiting for every one would let a single
  // lane whose warm-up turn spawned a long subagent fan-out hold the measurement back.
  const size_t quorum = (lanes_.size() * 9 + 9) / 10;
  if (lanes_warm_ < quorum || window_opened_at_) return;
  window_opened_at_ = sim_->now();
  if (options_.duration_s > 0) {
    sim_->At(*window_opened_at_ + options_.duration_s, [this] { StopAt(sim_->now()); });
  }
}

void ReplayDriver::StopAt(double time) {
  if (stop_time_) return;
  stop_time_ = time;
  sim_->Stop();
}

}  // namespace kvpool::replay
