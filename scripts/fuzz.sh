#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ (clang-16, ASan + UBSan) and runs each for SECONDS
# (default 60) from its seed corpus in fuzz/corpus/<target>/. New inputs go to a scratch
# corpus, never into the repo; a crash, a leak, a hang (an input slower than 10 s) or an
# out-of-memory stops the target, keeps the input under $OUT, and fails the script.
# Prints one line per target (inputs run, coverage, corpus size) and writes the same as JSON
# lines to $OUT/summary.jsonl. RUNS=N stops a target after N inputs (SECONDS still bounds it).
#
# usage: [RUNS=N] [OUT=dir] [FUZZ_JOBS=N] scripts/fuzz.sh [SECONDS] [TARGET...]   (OUT keeps logs and any
#        crash input; FUZZ_JOBS targets run at once, default one per core)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
CLANG=${CLANG:-clang-16}
command -v "$CLANG" >/dev/null || { echo "fuzz.sh: $CLANG not found (apt-get install clang-16 libclang-rt-16-dev)" >&2; exit 2; }
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=($(ls fuzz/corpus))
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

# Line tables (-g1) are all a crash report needs.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DPython_EXECUTABLE=/usr/bin/python3 \
  -DCMAKE_C_COMPILER="$CLANG" -DCMAKE_CXX_COMPILER="${CLANG/clang/clang++}" -DKVPOOL_FUZZ=ON \
  -DKVPOOL_SANITIZE="address;undefined" -DKVPOOL_TESTS=OFF -DKVPOOL_BENCH=OFF >"$OUT/configure.log" 2>&1 \
  || { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C build-fuzz "${TARGETS[@]}" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }

# One target: its run, then its summary line ($OUT/$t.jsonl) and its table line ($OUT/$t.line).
fuzz_target() {
  local t=$1 scratch start verdict runs cov corpus
  scratch=$(mktemp -d)
  cp fuzz/corpus/"$t"/* "$scratch"/
  # UBSan findings abort like ASan's, so they count as crashes.
  start=$(date +%s.%N)
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
     build-fuzz/fuzz/"$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       ${RUNS:+-runs=$RUNS} -print_final_stats=1 -artifact_prefix="$OUT/$t-" "$scratch" >"$OUT/$t.log" 2>&1; then
    verdict=ok
  else
    verdict="FAILED (see $OUT/$t.log; input kept as $OUT/$t-*)"
    tail -40 "$OUT/$t.log" >&2
  fi
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$OUT/$t.log" | grep -oE '[0-9]+$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+' "$OUT/$t.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
  corpus=$(ls "$scratch" | wc -l)
  echo "{\"target\": \"$t\", \"inputs\": $runs, \"seconds\": $(/usr/bin/python3 -c "print(round($(date +%s.%N) - $start, 1))"), \"cov\": $cov, \"corpus\": $corpus, \"ok\": $([ "$verdict" = ok ] && echo true || echo false)}" >"$OUT/$t.jsonl"
  printf '%-22s %12s inputs  cov %6s  corpus %5s  %s\n' "$t" "$runs" "$cov" "$corpus" "$verdict" >"$OUT/$t.line"
  rm -rf "$scratch"
  [ "$verdict" = ok ]
}

# FUZZ_JOBS targets at once (default: one per core; libFuzzer runs one input at a time), each for
# SECONDS on a core of its own; then one line per target, in order.
failed=0
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "${FUZZ_JOBS:-$(nproc)}" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_target "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
: >"$OUT/summary.jsonl"
for t in "${TARGETS[@]}"; do
  cat "$OUT/$t.line"
  cat "$OUT/$t.jsonl" >>"$OUT/summary.jsonl"
done
exit $failed
