// SynthesizeCorpus: a deterministic, synthetic AgentX corpus shaped like the public
// coding-agent corpus the replay is measured against (semianalysisai/cc-traces-weka-062126),
// for tests and benchmarks that cannot ship the real traces.
//
// What it reproduces (corpus_synthesizer_test.cc checks the ranges; `kvpool trace stats`
// prints them): median ~65 main-thread turns over ~2 h; context growing from ~40K tokens by a
// median ~1.7K new tokens a turn; think/tool waits of seconds to minutes with rare long
// pauses (one of 87 min); parallel subagent fan-outs of 1-4 (some launched in the background
// after the last turn); auto-compaction near the model's context window; occasional early
// divergence after a long pause (only the system+tools prefix still matches); block_size 64,
// hash_id_scope "local"; a few traces past a 917,504-token context; reuse ceiling ~96-97%.
//
// Determinism: the same options and seed give an identical Corpus (and identical bytes from
// the writer) on every platform: the generator and distributions are implemented here, not
// taken from <random>. Trace i depends only on (seed, i), so a smaller corpus is a prefix of
// a larger one.
#pragma once

#include <cstdint>

#include "trace/trace.h"

namespace kvpool::trace {

struct SynthesisOptions {
  int traces = 393;
  // Multiplies every trace's number of main-thread turns; < 1 makes a small corpus for tests.
  double turn_scale = 1.0;
  // Upper bound on a trace's main-thread turns (before turn_scale).
  int max_turns = 1500;
  int64_t block_size = 64;
};

// REQUIRES: options.traces >= 0, options.turn_scale > 0, options.block_size > 0.
Corpus SynthesizeCorpus(const SynthesisOptions& options, uint64_t seed);

}  // namespace kvpool::trace
