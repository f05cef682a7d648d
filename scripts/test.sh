#!/usr/bin/env bash
# Builds kvpool and runs every test: the docs checks; a release build of what is shipped (with
# the CUDA code where nvcc is installed) and its checks: the README's main job
# (scripts/demo.sh, tests/demo_test.sh), the Python module, the deployment files, the report
# page; a compile without UCX; then an ASan+UBSan build of everything and the whole unit and
# integration suite on it, a TSan build of the concurrent components and their unit tests, and
# a short libFuzzer run of every fuzz target. Ends with a table of every stage's time.
# Usage: scripts/test.sh [--quick]   (the release stage only)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
# stage NAME COMMAND...: runs a stage and keeps its time for the table printed at exit (and
# written as JSON to $TEST_TIMES, default build/test-times.json: scripts/bench-ci-time.sh reads it).
STAGE_NAMES=() STAGE_SECONDS=()
stage() {
  local name=$1 start=$SECONDS; shift
  "$@"
  STAGE_NAMES+=("$name") STAGE_SECONDS+=($((SECONDS - start)))
}
print_times() {
  local status=$? i json="" file=${TEST_TIMES:-build/test-times.json}
  echo "== stage times (scripts/test.sh$([ $status = 0 ] || echo ", stopped by a failure"))"
  for i in "${!STAGE_NAMES[@]}"; do
    printf '  %-34s %5d s\n' "${STAGE_NAMES[$i]}" "${STAGE_SECONDS[$i]}"
    json+="${json:+, }{\"stage\": \"${STAGE_NAMES[$i]}\", \"seconds\": ${STAGE_SECONDS[$i]}}"
  done
  printf '  %-34s %5d s\n' "total" "$SECONDS"
  mkdir -p "$(dirname "$file")"
  echo "{\"passed\": $([ $status = 0 ] && echo true || echo false), \"seconds\": $SECONDS, \"stages\": [$json]}" >"$file"
}
trap print_times EXIT
configure() {  # configure DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 "$@" >/dev/null
}
build() {  # build DIR TARGET...
  local dir=$1; shift
  echo "== building $dir ($*)"
  ninja -C "$dir" -j "$JOBS" "$@" >/dev/null
}
# Tests that must run where the suite runs as root (CI: network namespaces, tmpfs mounts, etcd
# and openssl installed): there a skip of one is a failure, never a quiet pass.
MUST_RUN=()
[ "$(id -u)" = 0 ] && MUST_RUN=(ClusterTest TierFileTest EtcdClientTest MasterFailover ClientAuthTest)
run_tests() {  # run_tests DIR [ctest args...]: the suite, then what it skipped and why
  local dir=$1; shift
  echo "== testing $dir"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --output-junit junit.xml "$@")
  /usr/bin/python3 scripts/skipped_tests.py "$dir/junit.xml" "${MUST_RUN[@]}"
}

# Where nvcc is installed (CI has one, but no GPU) the release build compiles the CUDA code
# too; its GPU tests skip without a device.
CUDA_ARGS=()
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] && CUDA_ARGS=(-DKVPOOL_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
# Line tables (-g1) are all a backtrace or a sanitizer report needs, and compile a quarter
# faster than full debug information.
LINES_O2=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# The docs say what is true: every src/ folder in the layout tables, every figure's freshness.
stage "docs: layout tables" scripts/check-layout.sh
stage "docs: freshness stamps" scripts/check-freshness.sh
configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${LINES_O2[@]}" "${CUDA_ARGS[@]}"
# The unit and integration suites run on the sanitizer builds below (every test under ASan+UBSan,
# the unit tests under TSan): compiling and running them a third time at -O2 would find little
# those do not, for a quarter of CI's time.
stage "release: build" build build release_checks
stage "release: tests" run_tests build -L 'release|gpu'
# The README's first command, as a user runs it: a change that breaks it fails here.
stage "main job (scripts/demo.sh)" tests/demo_test.sh build
[ "${1:-}" = "--quick" ] && exit 0

# "Builds without UCX" is promised: only the transfer component changes without it (its
# ucx_absent.cc), so compiling and linking it with its test is the check.
configure build-no-ucx -DCMAKE_BUILD_TYPE=RelWithDebInfo "${LINES_O2[@]}" -DKVPOOL_UCX=OFF -DKVPOOL_BENCH=OFF
stage "no UCX: compile transfer" build build-no-ucx transfer_test

# The tests labelled release (DeployFiles, ReportHtml: files an operator installs and a page a
# browser opens) ran on the release build; under ASan they would only cost a minute and a half.
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DKVPOOL_SANITIZE="address;undefined" -DKVPOOL_BENCH=OFF
stage "ASan: build" build build-asan all
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 stage "ASan: tests" run_tests build-asan \
  -LE release

# Debian's gRPC and abseil (and cpp-httplib, under the /metrics endpoint) are not built with
# TSan, so tests that run a gRPC server or client, or an endpoint, report races inside those
# libraries; TSan covers every unit test that does not, and the
# connector's restore and save engines run here against the master's core with no gRPC in the
# path (the LocalPool suites, src/connector/test_local_pool.h). Debian's UCX is not built with
# TSan either: it hands one-sided bytes over through its own shared memory and sockets, which
# TSan cannot see (a false race on every transfer), so the tests that move bytes over UCX run
# under ASan only, and UCX's memory hooks stay off here (UCX_MEM_EVENTS=no: they break TSan's
# thread teardown). A parameterized suite is named with its instantiation
# (ReadPaths/SsdPoolTest); a name that matches no test fails the run, so a renamed suite
# cannot slip back under TSan unnoticed.
TSAN_SKIPS=(MasterServer StorageService Layouts/RestoreEngineTest Layouts/ShortLeaseRestoreTest
  Layouts/PartsRestoreTest OverGrpc/SaveEngineTest PrefixLookupTest PrefixLookupMissTest PrefixLookupOverPartsTest
  ClientPartsTest Transports/ClientChecksumTest ClientAuthTest DeploymentTest FourServerTest
  ReplayEndToEndTest PlanAgainstReplayTest ReadPaths/SsdPoolTest MetricsEndpoint
  "Transports/TransferRoundTripTest.*/ucx_" "Transports/TransferAuthTest.*/ucx_" UcxPeerFailureTest
  "Transports/NetworkKvHandoffTest.*/ucx" HandoffNetwork.SendersWriteOverUcx)
# -O1, as TSan's own docs suggest: it compiles faster than -O2, and TSan's own checks are most
# of the tests' time either way.
configure build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DKVPOOL_SANITIZE=thread \
  -DKVPOOL_BENCH=OFF
stage "TSan: build" build build-tsan unit_tests
for skip in "${TSAN_SKIPS[@]}"; do
  matched=$(cd build-tsan && ctest -N -R "^$skip" | sed -n 's/^Total Tests: //p')
  if [ "$matched" = 0 ]; then
    echo "scripts/test.sh: the TSan skip '$skip' matches no test" >&2; exit 1
  fi
done
UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1 stage "TSan: tests" run_tests build-tsan -L unit -E "^($(IFS='|'; echo "${TSAN_SKIPS[*]}"))"
# Every decoder of outside bytes under libFuzzer (ASan + UBSan), 15 s each: a regression net.
echo "== fuzzing (scripts/fuzz.sh 15)"
stage "fuzz: build and 15 s a target" ./scripts/fuzz.sh 15
echo "== all suites passed"
