#!/usr/bin/env bash
# Builds kvpool and runs every test: a release build (with the CUDA code where nvcc is
# installed), then an ASan+UBSan build of everything, a TSan build of the concurrent
# components, and a short libFuzzer run of every fuzz target. Usage: scripts/test.sh [--quick]
# (release only).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
configure() {  # configure DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DPython_EXECUTABLE=/usr/bin/python3 "$@" >/dev/null
}
run_suite() {  # run_suite DIR NINJA_TARGET [ctest args...]
  local dir=$1 target=$2; shift 2
  echo "== building $dir ($target)"
  ninja -C "$dir" -j "$JOBS" "$target" >/dev/null
  echo "== testing $dir"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" "$@")
}

# Where nvcc is installed (CI has one, but no GPU) the release build compiles the CUDA code
# too; its GPU tests skip without a device.
CUDA_ARGS=()
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] && CUDA_ARGS=(-DKVPOOL_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC")
# Line tables (-g1) are all a backtrace or a sanitizer report needs, and compile a quarter
# faster than full debug information.
LINES_O2=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${LINES_O2[@]}" "${CUDA_ARGS[@]}"
run_suite build all
[ "${1:-}" = "--quick" ] && exit 0

# DeployFiles and ReportHtml check files an operator installs and a page a browser opens: the
# release suite checks them the same way, and under ASan they only cost a minute and a half.
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DKVPOOL_SANITIZE="address;undefined" -DKVPOOL_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_suite build-asan all \
  -E '^(DeployFiles|ReportHtml)$'

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
  Layouts/PartsRestoreTest OverGrpc/SaveEngineTest PrefixLookupTest PrefixLookupOverPartsTest
  ClientPartsTest Transports/ClientChecksumTest ClientAuthTest DeploymentTest FourServerTest
  ReplayEndToEndTest PlanAgainstReplayTest ReadPaths/SsdPoolTest MetricsEndpoint
  "Transports/TransferRoundTripTest.*/ucx_" "Transports/TransferAuthTest.*/ucx_" UcxPeerFailureTest
  "Transports/NetworkKvHandoffTest.*/ucx" HandoffNetwork.SendersWriteOverUcx)
configure build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${LINES_O2[@]}" -DKVPOOL_SANITIZE=thread \
  -DKVPOOL_BENCH=OFF
ninja -C build-tsan -j "$JOBS" unit_tests >/dev/null
for skip in "${TSAN_SKIPS[@]}"; do
  matched=$(cd build-tsan && ctest -N -R "^$skip" | sed -n 's/^Total Tests: //p')
  if [ "$matched" = 0 ]; then
    echo "scripts/test.sh: the TSan skip '$skip' matches no test" >&2; exit 1
  fi
done
UCX_MEM_EVENTS=no TSAN_OPTIONS=halt_on_error=1 run_suite build-tsan unit_tests -L unit -E "^($(IFS='|'; echo "${TSAN_SKIPS[*]}"))"
# Every decoder of outside bytes under libFuzzer (ASan + UBSan), 15 s each: a regression net.
echo "== fuzzing (scripts/fuzz.sh 15)"
./scripts/fuzz.sh 15
echo "== all suites passed"
