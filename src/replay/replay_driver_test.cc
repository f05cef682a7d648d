#include "engine/deployment.h"
#include "replay/replay_driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace kvpool::replay {
namespace {

trace::Request Turn(double t, int64_t blocks, uint64_t first_id, double api_time, int64_t out = 8) {
  trace::Request r;
  r.start_time_s = t;
  r.input_tokens = blocks * 64;
  r.output_tokens = out;
  std::vector<uint64_t> ids;
  for (int64_t i = 0; i < blocks; ++i) ids.push_back(first_id + i);
  r.hash_ids = trace::BlockIds(ids);
  r.api_time_s = api_time;
  return r;
}

// Main turns of 1, 2, 3, 4 blocks (extending each other); a subagent of 10 blocks spawned
// after turn 1 gates turn 2; a 1000 s pause before turn 3 (capped at 300 s).
trace::Corpus OneTrace() {
  trace::Trace t;
  t.id = "t";
  t.requests = {Turn(0, 1, 1, 1), Turn(10, 2, 1, 1), Turn(20, 3, 1, 1), Turn(1021, 4, 1, 1)};
  trace::Subagent s;
  s.spawned_after_turn = 1;
  s.gates_turn = 2;
  s.requests = {Turn(12, 10, 100, 1), Turn(14, 10, 100, 1)};
  t.subagents = {s};
  trace::Corpus c;
  c.traces = {t};
  return c;
}

// Serves each request a second after it arrives and records what the driver tells a router
// about a thread's prompts: (the previous prompt's length, its first changed token).
class SupersessionRecordingSink final : public engine::RequestSink {
 public:
  explicit SupersessionRecordingSink(engine::Simulation* sim)
      : sim_(sim), geometry_(engine::GeometryPreset("tiny").value()) {}
  void Submit(engine::DeploymentRequest r, std::function<void(const engine::RequestRecord&)> on_done) override {
    engine::RequestRecord record;
    record.session_id = r.session_id;
    record.counted = r.counted;
    record.arrival_s = sim_->now();
    record.input_tokens = r.tokens.size();
    record.output_tokens = r.output_tokens;
    sim_->After(1, [this, record, on_done = std::move(on_done)]() mutable {
      record.first_token_s = record.finish_s = sim_->now();
      on_done(record);
    });
  }
  const engine::ModelGeometry& geometry() const override { return geometry_; }
  bool uses_pool() const override { return true; }
  void RetainSession(std::span<const connector::TokenId>, std::chrono::milliseconds,
                     std::chrono::milliseconds) override {}
  void ReleaseSession(std::span<const connector::TokenId>) override {}
  void SupersedeSession(std::span<const connector::TokenId> previous, size_t first_changed) override {
    superseded.emplace_back(previous.size(), first_changed);
  }

  std::vector<std::pair<size_t, size_t>> superseded;

 private:
  engine::Simulation* const sim_;
  const engine::ModelGeometry geometry_;
};

// A thread whose third turn keeps only the first two blocks of its second (what auto-compaction
// or a divergence after a long pause does): that turn, and only it, supersedes the prompt before.
TEST(SupersessionTest, ATurnThatStopsContinuingThePreviousPromptSupersedesItsRest) {
  trace::Trace t;
  t.id = "t";
  t.requests = {Turn(0, 4, 1, 1), Turn(10, 6, 1, 1), Turn(20, 3, 1, 1), Turn(30, 5, 1, 1)};
  t.requests[2].hash_ids = trace::BlockIds(std::vector<uint64_t>{1, 2, 50});
  t.requests[3].hash_ids = trace::BlockIds(std::vector<uint64_t>{1, 2, 50, 51, 52});
  trace::Corpus corpus;
  corpus.traces = {t};
  for (const bool supersede : {false, true}) {
    engine::Simulation sim;
    SupersessionRecordingSink sink(&sim);
    ReplayOptions o;
    o.sessions = 1;
    o.warmup_requests = 0;
    o.duration_s = 0;
    o.max_requests = 4;
    o.supersede = supersede;
    ReplayDriver driver(corpus, o, &sink, &sim);
    ASSERT_TRUE(driver.Start().ok());
    sim.Run();
    ASSERT_GE(driver.records().size(), 4u);
    if (supersede) {
      EXPECT_EQ(sink.superseded, (std::vector<std::pair<size_t, size_t>>{{6 * 64, 2 * 64}}));
    } else {
      EXPECT_TRUE(sink.superseded.empty());
    }
  }
}

class ReplayDriverTest : public ::testing::Test {
 protected:
  ReplayDriverTest() {
    engine::DeploymentOptions o;
    o.geometry = engine::GeometryPreset("tiny").value();
    deployment_ = std::move(engine::Deployment::Create(o, &sim_)).value();
  }
  engine::Simulation sim_;
  std::unique_ptr<engine::Deployment> deployment_;
};

// What the client asks for: at most max_tokens, generating the recorded output capped at it;
// without max_tokens, exactly the recorded output.
TEST(SetRequestOutputTest, CapsTheRecordedOutputAtTheClientsMaxTokens) {
  engine::DeploymentRequest r;
  ReplayOptions o;
  SetRequestOutput(o, 8, &r);
  EXPECT_EQ(r.output_tokens, 8u);
  EXPECT_EQ(r.max_tokens, 0u);
  o.max_output_tokens = 32000;
  SetRequestOutput(o, 8, &r);
  EXPECT_EQ(r.output_tokens, 8u);
  EXPECT_EQ(r.max_tokens, 32000u);
  o.max_output_tokens = 3;
  SetRequestOutput(o, 8, &r);
  EXPECT_EQ(r.output_tokens, 3u);
  EXPECT_EQ(r.max_tokens, 3u);
  SetRequestOutput(o, 0, &r);
  EXPECT_EQ(r.output_tokens, 1u);  // every request generates its first token
}

TEST_F(ReplayDriverTest, SubagentsGateTheNextTurnAndLongPausesAreCapped) {
  const trace::Corpus corpus = OneTrace();
  ReplayOptions o;
  o.sessions = 1;
  o.warmup_requests = 0;
  o.duration_s = 5000;
  ReplayDriver driver(corpus, o, deployment_.get(), &sim_);
  ASSERT_TRUE(driver.Start().ok());
  sim_.Run();
  // Group records of the sessions replayed from turn 0 (session 1 started at a random turn).
  std::map<uint64_t, std::map<uint64_t, std::vector<engine::RequestRecord>>> by_session;  // session -> input -> records
  for (const engine::RequestRecord& r : driver.records()) by_session[r.session_id][r.input_tokens].push_back(r);
  ASSERT_GE(by_session.size(), 2u);
  const auto& s = by_session.at(2);
  ASSERT_EQ(s.at(640).size(), 2u);  // both subagent requests
  const engine::RequestRecord& turn1 = s.at(128).at(0);
  const engine::RequestRecord& turn2 = s.at(192).at(0);
  const engine::RequestRecord& turn3 = s.at(256).at(0);
  const engine::RequestRecord& sub_first = s.at(640).at(0);
  const engine::RequestRecord& sub_last = s.at(640).at(1);
  EXPECT_NEAR(sub_first.arrival_s - turn1.finish_s, 1.0, 1e-9);  // recorded 12 - (10 + 1)
  EXPECT_GE(turn2.arrival_s, sub_last.finish_s);  // gated by the subagent
  EXPECT_NEAR(turn3.arrival_s - turn2.finish_s, 300.0, 1e-9);  // 1000 s capped
  for (const engine::RequestRecord& r : driver.records()) {
    EXPECT_FALSE(r.failed) << r.failure;
    EXPECT_EQ(r.verification_errors, 0u);
    EXPECT_EQ(r.counted, r.session_id != 1 || r.request_id != 1);  // only the primer is uncounted
  }
  // Turn 2 extends turn 1, so the GPU cache serves turn 1's tokens.
  EXPECT_EQ(turn2.gpu_cached_tokens, 128u);
  EXPECT_EQ(turn2.ceiling_hit_tokens, 128u);
  EXPECT_GE(driver.window_start_s(), 0);
}

TEST_F(ReplayDriverTest, PacedArrivalsSetTheRateAndKeepEachSessionsTurnsInOrder) {
  // Twenty turns, each extending the last, recorded 1000 s apart (capped at 300 s unpaced).
  trace::Trace t;
  t.id = "long";
  for (int i = 0; i < 20; ++i) t.requests.push_back(Turn(1000.0 * i, i + 1, 1, 1));
  trace::Corpus corpus;
  corpus.traces = {t};
  ReplayOptions o;
  o.sessions = 4;
  o.warmup_requests = 0;
  o.duration_s = 0;
  o.max_requests = 200;
  o.arrival_rate = 2;
  o.max_output_tokens = 3;
  ReplayDriver driver(corpus, o, deployment_.get(), &sim_);
  ASSERT_TRUE(driver.Start().ok());
  sim_.Run();
  ASSERT_GE(driver.records().size(), 200u);
  std::vector<double> arrivals;
  std::map<uint64_t, std::vector<const engine::RequestRecord*>> by_session;
  for (const engine::RequestRecord& r : driver.records()) {
    EXPECT_FALSE(r.failed) << r.failure;
    EXPECT_EQ(r.output_tokens, 3u);  // the recorded 8, capped
    arrivals.push_back(r.arrival_s);
    by_session[r.session_id].push_back(&r);
  }
  // The lanes always have a turn due here, so turns arrive at the Poisson rate, not the trace's.
  std::sort(arrivals.begin(), arrivals.end());
  const double rate = static_cast<double>(arrivals.size() - 1) / (arrivals.back() - arrivals.front());
  EXPECT_GT(rate, 0.7 * o.arrival_rate);
  EXPECT_LT(rate, 1.3 * o.arrival_rate);
  // A session's turns never overlap: each is sent after the previous one's answer.
  for (auto& [session, records] : by_session) {
    std::sort(records.begin(), records.end(),
              [](const engine::RequestRecord* a, const engine::RequestRecord* b) { return a->arrival_s < b->arrival_s; });
    for (size_t i = 1; i < records.size(); ++i) {
      EXPECT_GE(records[i]->arrival_s, records[i - 1]->finish_s);
      EXPECT_GT(records[i]->input_tokens, records[i - 1]->input_tokens);
    }
  }
}

TEST_F(ReplayDriverTest, TracesThatDoNotFitAreSkipped) {
  trace::Corpus corpus = OneTrace();
  corpus.traces[0].requests[3] = Turn(1021, 5000, 1, 1);  // 320K tokens > the tiny caches
  ReplayOptions o;
  ReplayDriver driver(corpus, o, deployment_.get(), &sim_);
  EXPECT_EQ(driver.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(driver.traces_skipped(), 1);
}

TEST_F(ReplayDriverTest, StopsAfterTheRequestLimit) {
  const trace::Corpus corpus = OneTrace();
  ReplayOptions o;
  o.sessions = 2;
  o.duration_s = 0;
  o.max_requests = 5;
  ReplayDriver driver(corpus, o, deployment_.get(), &sim_);
  ASSERT_TRUE(driver.Start().ok());
  sim_.Run();
  EXPECT_EQ(driver.counted_finished(), 5);
}

}  // namespace
}  // namespace kvpool::replay
