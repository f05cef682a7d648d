// Test-only: the tiny replay the end-to-end tests run (src/replay/replay_e2e_test.cc on the CPU,
// tests/gpu/replay_gpu_test.cc with every cache on the GPUs): a 12-trace synthetic corpus at a
// third of the published turn counts, 3 sessions, 24 requests, no pacing, the tiny geometry.
#pragma once

#include "replay/replay_run.h"
#include "trace/corpus_synthesizer.h"

namespace kvpool::replay::testing {

inline ReplayRunOptions TinyRun(bool use_pool) {
  ReplayRunOptions o;
  o.geometry = engine::GeometryPreset("tiny").value();
  o.replay.sessions = 3;
  o.replay.max_requests = 24;
  o.replay.duration_s = 0;
  o.replay.seed = 5;
  o.use_pool = use_pool;
  return o;
}

inline trace::Corpus SmallCorpus() {
  trace::SynthesisOptions s;
  s.traces = 12;
  s.turn_scale = 0.3;
  return trace::SynthesizeCorpus(s, 3);
}

}  // namespace kvpool::replay::testing
